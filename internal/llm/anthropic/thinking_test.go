package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

const signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"

// thinkingToolReply thinks, signs, and calls current_time.
var thinkingToolReply = stream(messageStart(50), thinkingStart(0), thinkingDelta(0, "The user wants the time."),
	signatureDelta(0, signature), blockStop(0), toolStart(1, "toolu_t", "current_time"), inputDelta(1, "{}"), blockStop(1),
	messageDelta("tool_use", 40), messageStop)

// afterTool is the history of the second call of that tool loop.
var afterTool = []llm.Message{
	{Role: llm.RoleUser, Content: "What time is it?"},
	{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_t", Name: "current_time", Arguments: "{}"}}},
	{Role: llm.RoleTool, ToolCallID: "toolu_t", Content: `{"time":"12:00"}`},
}

// TestClient_Stream_Thinking: with thinking_budget, thinking is enabled and
// streamed as reasoning, and the signed thinking block goes back, first in
// the assistant message, with the tool results, as the API requires.
func TestClient_Stream_Thinking(t *testing.T) {
	s := llmtest.NewServer(t, thinkingToolReply, textReply("It is noon.", 80, 10))
	p := mustClient(t, s, map[string]any{"thinking_budget": 2048})

	first, err := llmtest.Collect(t, p, llm.Request{Messages: afterTool[:1]})
	require.NoError(t, err)
	assert.Equal(t, "The user wants the time.", first.Reasoning)
	second, err := llmtest.Collect(t, p, llm.Request{Messages: afterTool})
	require.NoError(t, err)
	assert.Equal(t, "It is noon.", second.Text)

	got := s.Requests()
	require.Len(t, got, 2)
	for _, r := range got {
		assert.JSONEq(t, `{"type":"enabled","budget_tokens":2048}`, r.Member(t, "thinking"))
		assert.NotContains(t, r.Body, "temperature")
	}
	assert.JSONEq(t, `[
		{"role":"user","content":[{"type":"text","text":"What time is it?"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"The user wants the time.","signature":"`+signature+`"},
			{"type":"tool_use","id":"toolu_t","name":"current_time","input":{}}
		]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_t","content":[{"type":"text","text":"{\"time\":\"12:00\"}"}]}]}
	]`, got[1].Member(t, "messages"))
}

// TestClient_Stream_ThinkingUnknown: a tool loop whose thinking this client
// never saw (say, from before a restart) goes without thinking rather than
// be rejected for lacking it.
func TestClient_Stream_ThinkingUnknown(t *testing.T) {
	s := llmtest.NewServer(t, textReply("It is noon.", 80, 10))
	_, err := llmtest.Collect(t, mustClient(t, s, map[string]any{"thinking_budget": 2048}), llm.Request{Messages: afterTool})
	require.NoError(t, err)
	assert.NotContains(t, s.Requests()[0].Body, "thinking")
}

// TestClient_Stream_NoThinking: without the option, thinking stays off.
func TestClient_Stream_NoThinking(t *testing.T) {
	s := llmtest.NewServer(t, textReply("Hi", 1, 1))
	p, err := anthropic.New(llm.ModelConfig{Name: "claude-sonnet-4-5", BaseURL: s.URL(), APIKey: testKey, MaxTokens: 1000})
	require.NoError(t, err)
	_, err = llmtest.Collect(t, p, llmtest.Hello)
	require.NoError(t, err)
	assert.NotContains(t, s.Requests()[0].Body, "thinking")
	assert.InDelta(t, 1000, s.Requests()[0].Body["max_tokens"], 0)
}

// TestClient_Stream_RedactedThinking: redacted thinking is not shown, but
// goes back with the tool results as it came, after any thinking block
// before it and ahead of the tool call, as the API requires.
func TestClient_Stream_RedactedThinking(t *testing.T) {
	s := llmtest.NewServer(t,
		stream(messageStart(50), thinkingStart(0), signatureDelta(0, signature), blockStop(0),
			`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}`, blockStop(1),
			toolStart(2, "toolu_t", "current_time"), inputDelta(2, "{}"), blockStop(2), messageDelta("tool_use", 40), messageStop),
		textReply("It is noon.", 80, 10))
	p := mustClient(t, s, map[string]any{"thinking_budget": 2048})

	first, err := llmtest.Collect(t, p, llm.Request{Messages: afterTool[:1]})
	require.NoError(t, err)
	assert.Empty(t, first.Reasoning)
	_, err = llmtest.Collect(t, p, llm.Request{Messages: afterTool})
	require.NoError(t, err)

	got := s.Requests()
	require.Len(t, got, 2)
	assert.JSONEq(t, `{"role":"assistant","content":[
		{"type":"thinking","thinking":"","signature":"`+signature+`"},
		{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
		{"type":"tool_use","id":"toolu_t","name":"current_time","input":{}}
	]}`, string(mustJSON(t, got[1].Body["messages"].([]any)[1])))
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	return b
}
