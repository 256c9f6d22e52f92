package llmtest

import (
	"cmp"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/tools"
)

// The checks below run against a real model API, from the providers'
// integration tests; a model's answers vary, so they check the shape of
// what comes back, not its words.

// CheckLiveText asks p for one word and checks that text and both token
// counts come back.
func CheckLiveText(t *testing.T, p llm.Provider) {
	t.Helper()
	got, err := Collect(t, p, llm.Request{
		System:   "You answer with one word.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Reply with the word pong."}},
	})
	require.NoError(t, err)
	assert.NotEmpty(t, got.Text)
	require.NotNil(t, got.Usage, "usage comes with the stream")
	assert.Positive(t, got.Usage.InputTokens)
	assert.Positive(t, got.Usage.OutputTokens)
}

// CheckLiveToolRoundTrip asks p for the time so that it calls the
// current_time tool with JSON arguments, sends the call's result back and
// checks that p answers from it: the loop a run makes.
func CheckLiveToolRoundTrip(t *testing.T, p llm.Provider) {
	t.Helper()
	def := tools.CurrentTime{}.Definition()
	req := llm.Request{
		System:   "Use the current_time tool whenever asked about the time.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "What time is it in UTC? Call the tool."}},
		Tools:    []llm.Tool{{Name: def.Name, Description: def.Description, Parameters: def.Parameters}},
	}
	first, err := Collect(t, p, req)
	require.NoError(t, err)
	require.NotEmpty(t, first.Calls, "the model calls the tool")
	c := first.Calls[0]
	assert.Equal(t, "current_time", c.Name)
	assert.True(t, json.Valid([]byte(cmp.Or(c.Args, "{}"))), "arguments %q are JSON", c.Args)

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: first.Text, ToolCalls: []llm.ToolCall{{ID: c.ID, Name: c.Name, Arguments: c.Args}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: `{"time":"2026-11-21T12:00:00Z","timezone":"UTC"}`},
	)
	second, err := Collect(t, p, req)
	require.NoError(t, err)
	assert.NotEmpty(t, second.Text, "the model answers from the tool result")
}
