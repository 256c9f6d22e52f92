//go:build integration

package openai_test

import (
	"cmp"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/llm/openai"
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

func TestIntegration_Text(t *testing.T) { llmtest.CheckLiveText(t, realClient(t)) }

func TestIntegration_ToolRoundTrip(t *testing.T) { llmtest.CheckLiveToolRoundTrip(t, realClient(t)) }
