//go:build integration

package anthropic_test

import (
	"cmp"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
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

func TestIntegration_Text(t *testing.T) { llmtest.CheckLiveText(t, realClient(t, nil)) }

// TestIntegration_ToolRoundTrip runs the loop with extended thinking on,
// which makes the API check that the signed thinking comes back with the
// tool result.
func TestIntegration_ToolRoundTrip(t *testing.T) {
	llmtest.CheckLiveToolRoundTrip(t, realClient(t, map[string]any{"thinking_budget": 1024}))
}
