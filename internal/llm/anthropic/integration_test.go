//go:build integration

package anthropic_test

import (
	"cmp"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/tools"
)

// realClient is a client for the real API with ANTHROPIC_API_KEY and
// ANTHROPIC_MODEL (default claude-sonnet-4-5); extra options are added to
// the model block. Without a key the test skips.
func realClient(t *testing.T, opts map[string]any) llm.Provider {
	t.Helper()
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		t.Skip("ANTHROPIC_API_KEY is not set: set it to run against the real API")
	}
	p, err := anthropic.New(llm.ModelConfig{
		Provider: "anthropic", Name: cmp.Or(os.Getenv("ANTHROPIC_MODEL"), "claude-sonnet-4-5"), APIKey: key,
		MaxTokens: 4096, Options: opts,
	})
	require.NoError(t, err)
	return p
}

func TestIntegration_Text(t *testing.T) {
	p := realClient(t, nil)
	got, err := collect(t, p, llm.Request{
		System:   "You answer with one word.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Reply with the word pong."}},
	})
	require.NoError(t, err)
	assert.NotEmpty(t, got.text)
	require.NotNil(t, got.usage)
	assert.Positive(t, got.usage.InputTokens)
	assert.Positive(t, got.usage.OutputTokens)
}

// TestIntegration_ToolRoundTrip runs the loop with extended thinking on,
// which makes the API check that the signed thinking comes back with the
// tool result.
func TestIntegration_ToolRoundTrip(t *testing.T) {
	p := realClient(t, map[string]any{"thinking_budget": 1024})
	def := tools.CurrentTime{}.Definition()
	req := llm.Request{
		System:   "Use the current_time tool whenever asked about the time.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "What time is it in UTC? Call the tool."}},
		Tools:    []llm.Tool{{Name: def.Name, Description: def.Description, Parameters: def.Parameters}},
	}
	first, err := collect(t, p, req)
	require.NoError(t, err)
	require.NotEmpty(t, first.calls, "the model calls the tool")
	c := first.calls[0]
	assert.Equal(t, "current_time", c.name)
	assert.True(t, json.Valid([]byte(cmp.Or(c.args, "{}"))), "arguments %q are JSON", c.args)

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: first.text, ToolCalls: []llm.ToolCall{{ID: c.id, Name: c.name, Arguments: c.args}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: c.id, Content: `{"time":"2026-11-21T12:00:00Z","timezone":"UTC"}`},
	)
	second, err := collect(t, p, req)
	require.NoError(t, err)
	assert.NotEmpty(t, second.text, "the model answers from the tool result")
}
