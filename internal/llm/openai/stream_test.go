package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/openai"
)

// TestClient_Stream_WireFormats feeds the client the streams OpenAI and
// compatible servers send and checks what it emits.
func TestClient_Stream_WireFormats(t *testing.T) {
	tests := []struct {
		name          string
		events        []string
		wantText      string
		wantReasoning string
		wantCalls     []call
		wantUsage     *llm.Usage
	}{
		{
			name:     "text only",
			events:   []string{roleChunk(), textChunk("Hel"), textChunk("lo"), textChunk(" world"), finishChunk("stop"), usageChunk(9, 3), done},
			wantText: "Hello world", wantUsage: &llm.Usage{InputTokens: 9, OutputTokens: 3},
		},
		{
			name: "one tool call, arguments split over many chunks",
			events: []string{
				chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}`, ""),
				callArgs(0, `{"`), callArgs(0, `loc`), callArgs(0, `ation`), callArgs(0, `":"`), callArgs(0, `Par`), callArgs(0, `is"}`),
				finishChunk("tool_calls"), usageChunk(40, 17), done,
			},
			wantCalls: []call{{"call_abc", "get_weather", `{"location":"Paris"}`}},
			wantUsage: &llm.Usage{InputTokens: 40, OutputTokens: 17},
		},
		{
			name: "two parallel tool calls",
			events: []string{
				roleChunk(),
				callStart(0, "call_1", "get_weather"), callArgs(0, `{"location":`), callArgs(0, `"Paris"}`),
				callStart(1, "call_2", "get_weather"), callArgs(1, `{"location":`), callArgs(1, `"Rome"}`),
				finishChunk("tool_calls"), usageChunk(50, 30), done,
			},
			wantCalls: []call{{"call_1", "get_weather", `{"location":"Paris"}`}, {"call_2", "get_weather", `{"location":"Rome"}`}},
			wantUsage: &llm.Usage{InputTokens: 50, OutputTokens: 30},
		},
		{
			name: "whole calls in one chunk each, without index (Ollama)",
			events: []string{
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","type":"function","function":{"name":"current_time","arguments":"{\"timezone\":\"UTC\"}"}}]}`, ""),
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_x2","type":"function","function":{"name":"memory_get","arguments":"{\"key\":\"name\"}"}}]}`, ""),
				finishChunk("stop"), done,
			},
			wantCalls: []call{{"call_x1", "current_time", `{"timezone":"UTC"}`}, {"call_x2", "memory_get", `{"key":"name"}`}},
		},
		{
			name: "text, then a tool call",
			events: []string{
				roleChunk(), textChunk("Let me check."), callStart(0, "call_1", "current_time"), callArgs(0, "{}"),
				finishChunk("tool_calls"), usageChunk(12, 8), done,
			},
			wantText: "Let me check.", wantCalls: []call{{"call_1", "current_time", "{}"}},
			wantUsage: &llm.Usage{InputTokens: 12, OutputTokens: 8},
		},
		{
			name: "reasoning_content (DeepSeek, vLLM)",
			events: []string{
				chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, ""),
				chunk(`{"content":null,"reasoning_content":"Six times seven"}`, ""),
				chunk(`{"content":null,"reasoning_content":" is 42."}`, ""),
				chunk(`{"content":"42","reasoning_content":null}`, ""),
				finishChunk("stop"), usageChunk(10, 20), done,
			},
			wantText: "42", wantReasoning: "Six times seven is 42.", wantUsage: &llm.Usage{InputTokens: 10, OutputTokens: 20},
		},
		{
			name: "reasoning (Ollama), keep-alive comments",
			events: []string{
				": keep-alive",
				chunk(`{"role":"assistant","content":"","reasoning":"Hmm."}`, ""),
				": keep-alive",
				chunk(`{"role":"assistant","content":"Hi!"}`, ""),
				finishChunk("stop"), done,
			},
			wantText: "Hi!", wantReasoning: "Hmm.",
		},
		{
			name:     "max_tokens reached is a short answer",
			events:   []string{roleChunk(), textChunk("Once upon"), finishChunk("length"), usageChunk(5, 2), done},
			wantText: "Once upon", wantUsage: &llm.Usage{InputTokens: 5, OutputTokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, stream(tt.events...))
			got, err := collect(t, mustClient(t, f, nil), hello)
			require.NoError(t, err)
			assert.Equal(t, tt.wantText, got.text)
			assert.Equal(t, tt.wantReasoning, got.reasoning)
			assert.Equal(t, tt.wantCalls, got.calls)
			assert.Equal(t, tt.wantUsage, got.usage)
			if tt.wantUsage != nil {
				assert.NotNil(t, got.chunks[len(got.chunks)-1].Usage, "usage comes last")
			}
			assert.Len(t, f.requests(), 1)
		})
	}
}

// TestClient_Stream_ToolCallPieces: the kernel gets the id and name with
// a call's first piece and each arguments fragment as it arrives.
func TestClient_Stream_ToolCallPieces(t *testing.T) {
	f := newFake(t, stream(roleChunk(), callStart(0, "call_1", "get_weather"), callArgs(0, `{"loc`), callArgs(0, `ation":"Oslo"}`),
		finishChunk("tool_calls"), done))
	got, err := collect(t, mustClient(t, f, nil), hello)
	require.NoError(t, err)
	var pieces []llm.ToolCallDelta
	for _, c := range got.chunks {
		if c.ToolCall != nil {
			pieces = append(pieces, *c.ToolCall)
		}
	}
	assert.Equal(t, []llm.ToolCallDelta{
		{Index: 0, ID: "call_1", Name: "get_weather"},
		{Index: 0, Arguments: `{"loc`},
		{Index: 0, Arguments: `ation":"Oslo"}`},
	}, pieces)
}

// TestClient_Stream_Request checks the request body and headers the server
// receives.
func TestClient_Stream_Request(t *testing.T) {
	f := newFake(t, stream(roleChunk(), textChunk("ok"), finishChunk("stop"), done))
	temp := 0.2
	req := llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Time in Paris and my name?"},
			{Role: llm.RoleAssistant, Content: "Checking.", ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "current_time", Arguments: `{"timezone":"Europe/Paris"}`},
				{ID: "call_2", Name: "memory_get", Arguments: ""},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Content: `{"time":"2026-11-21T13:00:00+01:00"}`},
			{Role: llm.RoleTool, ToolCallID: "call_2", Content: "error: key not found", IsError: true},
			{Role: llm.RoleAssistant, Content: "It is 13:00; I do not know your name."},
			{Role: llm.RoleUser, Content: "Thanks"},
		},
		Tools: []llm.Tool{{Name: "current_time", Description: "Returns the current time.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}}}`)}},
		Temperature: &temp,
		MaxTokens:   256,
	}
	_, err := collect(t, mustClient(t, f, nil), req)
	require.NoError(t, err)

	got := f.requests()
	require.Len(t, got, 1)
	assert.Equal(t, "/v1/chat/completions", got[0].path)
	assert.Equal(t, "Bearer "+testKey, got[0].header.Get("Authorization"))
	body, err := json.Marshal(got[0].body)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"model": "gpt-4o-mini",
		"stream": true,
		"stream_options": {"include_usage": true},
		"temperature": 0.2,
		"max_tokens": 256,
		"messages": [
			{"role": "system", "content": "You are terse."},
			{"role": "user", "content": "Time in Paris and my name?"},
			{"role": "assistant", "content": "Checking.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": "{\"timezone\":\"Europe/Paris\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "memory_get", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "{\"time\":\"2026-11-21T13:00:00+01:00\"}"},
			{"role": "tool", "tool_call_id": "call_2", "content": "error: key not found"},
			{"role": "assistant", "content": "It is 13:00; I do not know your name."},
			{"role": "user", "content": "Thanks"}
		],
		"tools": [{"type": "function", "function": {"name": "current_time", "description": "Returns the current time.",
			"parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}}]
	}`, string(body))
}

// TestClient_Stream_LocalServer: with a base_url and no key (Ollama), no
// Authorization header is sent, and a request without tools or settings
// carries none of them.
func TestClient_Stream_LocalServer(t *testing.T) {
	f := newFake(t, stream(roleChunk(), textChunk("ok"), finishChunk("stop"), done))
	p, err := openai.New(llm.ModelConfig{Provider: "openai", Name: "llama3.2", BaseURL: f.baseURL()})
	require.NoError(t, err)
	_, err = collect(t, p, hello)
	require.NoError(t, err)
	got := f.requests()
	require.Len(t, got, 1)
	assert.Empty(t, got[0].header.Get("Authorization"))
	assert.Equal(t, "llama3.2", got[0].body["model"])
	for _, absent := range []string{"tools", "temperature", "max_tokens", "max_completion_tokens"} {
		assert.NotContains(t, got[0].body, absent)
	}
}
