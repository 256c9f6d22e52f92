package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/llm/openai"
)

// TestClient_Stream_WireFormats feeds the client the streams OpenAI and
// compatible servers send and checks what it emits.
func TestClient_Stream_WireFormats(t *testing.T) {
	adapter.CheckStreams(t, []llmtest.StreamCase{
		{
			Name:  "text only",
			Reply: stream(roleChunk(), textChunk("Hel"), textChunk("lo"), textChunk(" world"), finishChunk("stop"), usageChunk(9, 3), done),
			Want:  llmtest.Result{Text: "Hello world", Usage: &llm.Usage{InputTokens: 9, OutputTokens: 3}},
		},
		{
			Name: "one tool call, arguments split over many chunks",
			Reply: stream(
				chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}`, ""),
				callArgs(0, `{"`), callArgs(0, `loc`), callArgs(0, `ation`), callArgs(0, `":"`), callArgs(0, `Par`), callArgs(0, `is"}`),
				finishChunk("tool_calls"), usageChunk(40, 17), done,
			),
			Want: llmtest.Result{
				Calls: []llmtest.Call{{ID: "call_abc", Name: "get_weather", Args: `{"location":"Paris"}`}},
				Usage: &llm.Usage{InputTokens: 40, OutputTokens: 17},
			},
		},
		{
			Name: "two parallel tool calls",
			Reply: stream(
				roleChunk(),
				callStart(0, "call_1", "get_weather"), callArgs(0, `{"location":`), callArgs(0, `"Paris"}`),
				callStart(1, "call_2", "get_weather"), callArgs(1, `{"location":`), callArgs(1, `"Rome"}`),
				finishChunk("tool_calls"), usageChunk(50, 30), done,
			),
			Want: llmtest.Result{
				Calls: []llmtest.Call{
					{ID: "call_1", Name: "get_weather", Args: `{"location":"Paris"}`},
					{ID: "call_2", Name: "get_weather", Args: `{"location":"Rome"}`},
				},
				Usage: &llm.Usage{InputTokens: 50, OutputTokens: 30},
			},
		},
		{
			Name: "whole calls in one chunk each, without index (Ollama)",
			Reply: stream(
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","type":"function","function":{"name":"current_time","arguments":"{\"timezone\":\"UTC\"}"}}]}`, ""),
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_x2","type":"function","function":{"name":"memory_get","arguments":"{\"key\":\"name\"}"}}]}`, ""),
				finishChunk("stop"), done,
			),
			Want: llmtest.Result{Calls: []llmtest.Call{
				{ID: "call_x1", Name: "current_time", Args: `{"timezone":"UTC"}`},
				{ID: "call_x2", Name: "memory_get", Args: `{"key":"name"}`},
			}},
		},
		{
			Name: "text, then a tool call",
			Reply: stream(
				roleChunk(), textChunk("Let me check."), callStart(0, "call_1", "current_time"), callArgs(0, "{}"),
				finishChunk("tool_calls"), usageChunk(12, 8), done,
			),
			Want: llmtest.Result{
				Text:  "Let me check.",
				Calls: []llmtest.Call{{ID: "call_1", Name: "current_time", Args: "{}"}},
				Usage: &llm.Usage{InputTokens: 12, OutputTokens: 8},
			},
		},
		{
			Name: "reasoning_content (DeepSeek, vLLM)",
			Reply: stream(
				chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, ""),
				chunk(`{"content":null,"reasoning_content":"Six times seven"}`, ""),
				chunk(`{"content":null,"reasoning_content":" is 42."}`, ""),
				chunk(`{"content":"42","reasoning_content":null}`, ""),
				finishChunk("stop"), usageChunk(10, 20), done,
			),
			Want: llmtest.Result{Text: "42", Reasoning: "Six times seven is 42.", Usage: &llm.Usage{InputTokens: 10, OutputTokens: 20}},
		},
		{
			Name: "reasoning (Ollama), keep-alive comments",
			Reply: stream(
				": keep-alive",
				chunk(`{"role":"assistant","content":"","reasoning":"Hmm."}`, ""),
				": keep-alive",
				chunk(`{"role":"assistant","content":"Hi!"}`, ""),
				finishChunk("stop"), done,
			),
			Want: llmtest.Result{Text: "Hi!", Reasoning: "Hmm."},
		},
		{
			Name: "named events (event: lines before data)",
			Reply: named("completion", roleChunk(), textChunk("Hi"), textChunk(" there"), finishChunk("stop"),
				usageChunk(4, 2), done),
			Want: llmtest.Result{Text: "Hi there", Usage: &llm.Usage{InputTokens: 4, OutputTokens: 2}},
		},
		{
			Name:  "nothing after [DONE] is read",
			Reply: stream(roleChunk(), textChunk("ok"), finishChunk("stop"), done, textChunk("late"), "not JSON"),
			Want:  llmtest.Result{Text: "ok"},
		},
		{
			Name: "a whole call of a megabyte in one line (Ollama)",
			Reply: stream(
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_big","type":"function","function":{"name":"write_file","arguments":`+
					jsonString(bigArgs)+`}}]}`, ""),
				finishChunk("tool_calls"), done,
			),
			Want: llmtest.Result{Calls: []llmtest.Call{{ID: "call_big", Name: "write_file", Args: bigArgs}}},
		},
		{
			Name:  "max_tokens reached is a short answer",
			Reply: stream(roleChunk(), textChunk("Once upon"), finishChunk("length"), usageChunk(5, 2), done),
			Want:  llmtest.Result{Text: "Once upon", Usage: &llm.Usage{InputTokens: 5, OutputTokens: 2}},
		},
	})
}

// bigArgs is a tool call's arguments of over a megabyte, far longer than
// the buffer lines are read into.
var bigArgs = `{"path":"notes.txt","content":"` + strings.Repeat("All work and no play. ", 50_000) + `"}`

// TestClient_Stream_Framing: however the server frames the stream on the
// wire (lines split over reads, CRLF or CR line endings), the client puts
// the same completion together.
func TestClient_Stream_Framing(t *testing.T) {
	reply := stream(": keep-alive", roleChunk(), chunk(`{"content":null,"reasoning_content":"Hm."}`, ""),
		textChunk("Let me check."), callStart(0, "call_1", "current_time"), callArgs(0, `{"timezone":`), callArgs(0, `"UTC"}`),
		callStart(1, "call_2", "memory_get"), callArgs(1, `{"key":"name"}`), finishChunk("tool_calls"), usageChunk(12, 8), done)
	adapter.CheckFraming(t, reply, llmtest.Result{
		Text: "Let me check.", Reasoning: "Hm.",
		Calls: []llmtest.Call{
			{ID: "call_1", Name: "current_time", Args: `{"timezone":"UTC"}`},
			{ID: "call_2", Name: "memory_get", Args: `{"key":"name"}`},
		},
		Usage: &llm.Usage{InputTokens: 12, OutputTokens: 8},
	})
}

// TestClient_Stream_ToolCallPieces: the kernel gets the id and name with
// a call's first piece and each arguments fragment as it arrives.
func TestClient_Stream_ToolCallPieces(t *testing.T) {
	reply := stream(roleChunk(), callStart(0, "call_1", "get_weather"), callArgs(0, `{"loc`), callArgs(0, `ation":"Oslo"}`),
		finishChunk("tool_calls"), done)
	adapter.CheckToolCallPieces(t, reply, []llm.ToolCallDelta{
		{Index: 0, ID: "call_1", Name: "get_weather"},
		{Index: 0, Arguments: `{"loc`},
		{Index: 0, Arguments: `ation":"Oslo"}`},
	})
}

// TestClient_Stream_Request checks the request body and headers the server
// receives.
func TestClient_Stream_Request(t *testing.T) {
	s := llmtest.NewServer(t, stream(roleChunk(), textChunk("ok"), finishChunk("stop"), done))
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
	_, err := llmtest.Collect(t, mustClient(t, s, nil), req)
	require.NoError(t, err)

	got := s.Requests()
	require.Len(t, got, 1)
	assert.Equal(t, "/v1/chat/completions", got[0].Path)
	assert.Equal(t, "Bearer "+testKey, got[0].Header.Get("Authorization"))
	assert.Equal(t, "application/json", got[0].Header.Get("Content-Type"))
	assert.Equal(t, "text/event-stream", got[0].Header.Get("Accept"))
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
	}`, string(got[0].Raw))
}

// TestClient_Stream_LocalServer: with a base_url and no key (Ollama), no
// Authorization header is sent, and a request without tools or settings
// carries none of them.
func TestClient_Stream_LocalServer(t *testing.T) {
	s := llmtest.NewServer(t, stream(roleChunk(), textChunk("ok"), finishChunk("stop"), done))
	p, err := openai.New(llm.ModelConfig{Provider: "openai", Name: "llama3.2", BaseURL: baseURL(s)})
	require.NoError(t, err)
	_, err = llmtest.Collect(t, p, llmtest.Hello)
	require.NoError(t, err)
	got := s.Requests()
	require.Len(t, got, 1)
	assert.Empty(t, got[0].Header.Get("Authorization"))
	assert.Equal(t, "llama3.2", got[0].Body["model"])
	for _, absent := range []string{"tools", "temperature", "max_tokens", "max_completion_tokens"} {
		assert.NotContains(t, got[0].Body, absent)
	}
}
