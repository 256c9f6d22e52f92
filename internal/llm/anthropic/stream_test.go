package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

// TestClient_Stream_WireFormats feeds the client the streams the Messages
// API sends and checks what it emits.
func TestClient_Stream_WireFormats(t *testing.T) {
	adapter.CheckStreams(t, []llmtest.StreamCase{
		{
			Name: "text only",
			Reply: stream(messageStart(25), textStart(0), ping, textDelta(0, "Hello"), textDelta(0, "!"),
				blockStop(0), messageDelta("end_turn", 15), messageStop),
			Want: llmtest.Result{Text: "Hello!", Usage: &llm.Usage{InputTokens: 25, OutputTokens: 15}},
		},
		{
			Name: "one tool call, input split over many deltas",
			Reply: stream(messageStart(472), toolStart(0, "toolu_01A", "get_weather"), inputDelta(0, ""),
				inputDelta(0, `{"loc`), inputDelta(0, `ation": "Par`), inputDelta(0, `is"}`), blockStop(0),
				messageDelta("tool_use", 89), messageStop),
			Want: llmtest.Result{
				Calls: []llmtest.Call{{ID: "toolu_01A", Name: "get_weather", Args: `{"location": "Paris"}`}},
				Usage: &llm.Usage{InputTokens: 472, OutputTokens: 89},
			},
		},
		{
			Name: "text, then two tool calls",
			Reply: stream(messageStart(30), textStart(0), textDelta(0, "Checking both."), blockStop(0),
				toolStart(1, "toolu_1", "get_weather"), inputDelta(1, `{"location":"Paris"}`), blockStop(1),
				toolStart(2, "toolu_2", "get_weather"), inputDelta(2, `{"location":`), inputDelta(2, `"Rome"}`), blockStop(2),
				messageDelta("tool_use", 60), messageStop),
			Want: llmtest.Result{
				Text: "Checking both.",
				Calls: []llmtest.Call{
					{ID: "toolu_1", Name: "get_weather", Args: `{"location":"Paris"}`},
					{ID: "toolu_2", Name: "get_weather", Args: `{"location":"Rome"}`},
				},
				Usage: &llm.Usage{InputTokens: 30, OutputTokens: 60},
			},
		},
		{
			Name: "thinking, then text",
			Reply: stream(messageStart(40), thinkingStart(0), thinkingDelta(0, "Six times seven"), thinkingDelta(0, " is 42."),
				signatureDelta(0, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"), blockStop(0),
				textStart(1), textDelta(1, "42"), blockStop(1), messageDelta("end_turn", 70), messageStop),
			Want: llmtest.Result{Text: "42", Reasoning: "Six times seven is 42.", Usage: &llm.Usage{InputTokens: 40, OutputTokens: 70}},
		},
		{
			Name: "tool call with its input in the start event",
			Reply: stream(messageStart(10),
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"current_time","input":{"timezone":"UTC"}}}`,
				blockStop(0), messageDelta("tool_use", 5), messageStop),
			Want: llmtest.Result{
				Calls: []llmtest.Call{{ID: "toolu_9", Name: "current_time", Args: `{"timezone":"UTC"}`}},
				Usage: &llm.Usage{InputTokens: 10, OutputTokens: 5},
			},
		},
		{
			Name: "redacted thinking emits nothing",
			Reply: stream(messageStart(10),
				`{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}`,
				blockStop(0), textStart(1), textDelta(1, "Done."), blockStop(1), messageDelta("end_turn", 9), messageStop),
			Want: llmtest.Result{Text: "Done.", Usage: &llm.Usage{InputTokens: 10, OutputTokens: 9}},
		},
		{
			Name: "events without event: lines",
			Reply: unnamed(messageStart(3), textStart(0), ping, textDelta(0, "Hi"), blockStop(0),
				messageDelta("end_turn", 1), messageStop),
			Want: llmtest.Result{Text: "Hi", Usage: &llm.Usage{InputTokens: 3, OutputTokens: 1}},
		},
		{
			Name: "input of a megabyte in one delta",
			Reply: stream(messageStart(10), toolStart(0, "toolu_big", "write_file"), inputDelta(0, bigInput), blockStop(0),
				messageDelta("tool_use", 5), messageStop),
			Want: llmtest.Result{
				Calls: []llmtest.Call{{ID: "toolu_big", Name: "write_file", Args: bigInput}},
				Usage: &llm.Usage{InputTokens: 10, OutputTokens: 5},
			},
		},
		{
			Name: "cached input tokens count as input",
			Reply: stream(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],`+
				`"model":"claude-sonnet-4-5","usage":{"input_tokens":5,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}`,
				textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 2), messageStop),
			Want: llmtest.Result{Text: "ok", Usage: &llm.Usage{InputTokens: 2105, OutputTokens: 2}},
		},
		{
			Name: "max_tokens reached is a short answer",
			Reply: stream(messageStart(5), textStart(0), textDelta(0, "Once upon"), blockStop(0),
				messageDelta("max_tokens", 2), messageStop),
			Want: llmtest.Result{Text: "Once upon", Usage: &llm.Usage{InputTokens: 5, OutputTokens: 2}},
		},
	})
}

// bigInput is a tool call's input of over a megabyte, far longer than the
// buffer lines are read into.
var bigInput = `{"path":"notes.txt","content":"` + strings.Repeat("All work and no play. ", 50_000) + `"}`

// TestClient_Stream_Framing: however the server frames the stream on the
// wire (lines split over reads, CRLF or CR line endings), the client puts
// the same message together.
func TestClient_Stream_Framing(t *testing.T) {
	reply := stream(messageStart(30), thinkingStart(0), thinkingDelta(0, "Hm."), signatureDelta(0, signature), blockStop(0),
		textStart(1), ping, textDelta(1, "Checking "), textDelta(1, "both."), blockStop(1),
		toolStart(2, "toolu_1", "get_weather"), inputDelta(2, `{"location":`), inputDelta(2, `"Paris"}`), blockStop(2),
		toolStart(3, "toolu_2", "get_weather"), inputDelta(3, `{"location":"Rome"}`), blockStop(3),
		messageDelta("tool_use", 60), messageStop)
	adapter.CheckFraming(t, reply, llmtest.Result{
		Text: "Checking both.", Reasoning: "Hm.",
		Calls: []llmtest.Call{
			{ID: "toolu_1", Name: "get_weather", Args: `{"location":"Paris"}`},
			{ID: "toolu_2", Name: "get_weather", Args: `{"location":"Rome"}`},
		},
		Usage: &llm.Usage{InputTokens: 30, OutputTokens: 60},
	})
}

// TestClient_Stream_ToolCallPieces: a tool call's index counts tool_use
// blocks from 0, whatever their content block index; the id and name come
// with the first piece, each input fragment as it arrives.
func TestClient_Stream_ToolCallPieces(t *testing.T) {
	reply := stream(messageStart(5), textStart(0), textDelta(0, "Hi."), blockStop(0),
		toolStart(1, "toolu_1", "get_weather"), inputDelta(1, ""), inputDelta(1, `{"loc`), inputDelta(1, `ation":"Oslo"}`), blockStop(1),
		messageDelta("tool_use", 5), messageStop)
	adapter.CheckToolCallPieces(t, reply, []llm.ToolCallDelta{
		{Index: 0, ID: "toolu_1", Name: "get_weather"},
		{Index: 0, Arguments: `{"loc`},
		{Index: 0, Arguments: `ation":"Oslo"}`},
	})
}

// TestClient_Stream_Request checks the request the server receives.
func TestClient_Stream_Request(t *testing.T) {
	s := llmtest.NewServer(t, textReply("ok", 1, 1))
	temp := 0.3
	req := llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Time in Paris and my name?"},
			{Role: llm.RoleAssistant, Content: "Checking.", ToolCalls: []llm.ToolCall{
				{ID: "toolu_1", Name: "current_time", Arguments: `{"timezone":"Europe/Paris"}`},
				{ID: "toolu_2", Name: "memory_get", Arguments: `{"key":`}, // cut short: sent as {}
			}},
			{Role: llm.RoleTool, ToolCallID: "toolu_1", Content: `{"time":"13:00"}`},
			{Role: llm.RoleTool, ToolCallID: "toolu_2", Content: "error: key not found", IsError: true},
			{Role: llm.RoleAssistant, Content: "It is 13:00."},
			{Role: llm.RoleUser, Content: "Thanks"},
		},
		Tools: []llm.Tool{{Name: "current_time", Description: "Returns the current time.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"],"additionalProperties":false}`)}},
		Temperature: &temp,
	}
	_, err := llmtest.Collect(t, mustClient(t, s, nil), req)
	require.NoError(t, err)

	got := s.Requests()
	require.Len(t, got, 1)
	assert.Equal(t, "/v1/messages", got[0].Path)
	assert.Equal(t, testKey, got[0].Header.Get("X-Api-Key"))
	assert.Equal(t, "2023-06-01", got[0].Header.Get("Anthropic-Version"))
	assert.Equal(t, "application/json", got[0].Header.Get("Content-Type"))
	assert.Empty(t, got[0].Header.Get("Authorization"))
	assert.JSONEq(t, `{
		"model": "claude-sonnet-4-5",
		"stream": true,
		"max_tokens": 4096,
		"temperature": 0.3,
		"system": [{"type": "text", "text": "You are terse."}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Time in Paris and my name?"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {"timezone": "Europe/Paris"}},
				{"type": "tool_use", "id": "toolu_2", "name": "memory_get", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "{\"time\":\"13:00\"}"}]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "error: key not found"}], "is_error": true}
			]},
			{"role": "assistant", "content": [{"type": "text", "text": "It is 13:00."}]},
			{"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
		],
		"tools": [{"name": "current_time", "description": "Returns the current time.",
			"input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"], "additionalProperties": false}}]
	}`, string(got[0].Raw))
}

// TestClient_Stream_History checks how histories the API would reject are
// made valid.
func TestClient_Stream_History(t *testing.T) {
	tests := []struct {
		name string
		msgs []llm.Message
		want string // the messages member
	}{
		{
			name: "starts with the assistant",
			msgs: []llm.Message{{Role: llm.RoleAssistant, Content: "Welcome back."}, {Role: llm.RoleUser, Content: "Hi"}},
			want: `[{"role":"user","content":[{"type":"text","text":"(earlier conversation omitted)"}]},
				{"role":"assistant","content":[{"type":"text","text":"Welcome back."}]},
				{"role":"user","content":[{"type":"text","text":"Hi"}]}]`,
		},
		{
			name: "starts with tool results whose call was cut off",
			msgs: []llm.Message{{Role: llm.RoleTool, ToolCallID: "toolu_gone", Content: "42"}, {Role: llm.RoleUser, Content: "Hi"}},
			want: `[{"role":"user","content":[{"type":"text","text":"Hi"}]}]`,
		},
		{
			name: "tool results, then the user steers",
			msgs: []llm.Message{
				{Role: llm.RoleUser, Content: "Go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "current_time", Arguments: "{}"}}},
				{Role: llm.RoleTool, ToolCallID: "toolu_1", Content: ""},
				{Role: llm.RoleUser, Content: "Also in UTC"},
			},
			want: `[{"role":"user","content":[{"type":"text","text":"Go"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"current_time","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"},{"type":"text","text":"Also in UTC"}]}]`,
		},
		{
			name: "empty history",
			msgs: nil,
			want: `[{"role":"user","content":[{"type":"text","text":"(earlier conversation omitted)"}]}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmtest.NewServer(t, textReply("ok", 1, 1))
			_, err := llmtest.Collect(t, mustClient(t, s, nil), llm.Request{Messages: tt.msgs})
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, s.Requests()[0].Member(t, "messages"))
		})
	}
}
