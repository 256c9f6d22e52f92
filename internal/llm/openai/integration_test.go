//go:build integration

package openai_test

import (
	"cmp"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/openai"
	"github.com/kerneld/kerneld/internal/tools"
)

// realClient is a client for the real API named by OPENAI_API_KEY,
// OPENAI_BASE_URL (optional: a compatible server, which may need no key)
// and OPENAI_MODEL (default gpt-4o-mini). Without a key or a base URL the
// test skips.
func realClient(t *testing.T) llm.Provider {
	t.Helper()
	key, base := os.Getenv("OPENAI_API_KEY"), os.Getenv("OPENAI_BASE_URL")
	if key == "" && base == "" {
		t.Skip("OPENAI_API_KEY is not set: set it (or OPENAI_BASE_URL, for a local server) to run against a real API")
	}
	p, err := openai.New(llm.ModelConfig{
		Provider: "openai", Name: cmp.Or(os.Getenv("OPENAI_MODEL"), "gpt-4o-mini"), BaseURL: base, APIKey: key,
		MaxTokens: 200,
	})
	require.NoError(t, err)
	return p
}

func TestIntegration_Text(t *testing.T) {
	p := realClient(t)
	got, err := collect(t, p, llm.Request{
		System:   "You answer with one word.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Reply with the word pong."}},
	})
	require.NoError(t, err)
	assert.NotEmpty(t, got.text)
	require.NotNil(t, got.usage, "usage is requested in the stream")
	assert.Positive(t, got.usage.InputTokens)
	assert.Positive(t, got.usage.OutputTokens)
}

func TestIntegration_ToolRoundTrip(t *testing.T) {
	p := realClient(t)
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
