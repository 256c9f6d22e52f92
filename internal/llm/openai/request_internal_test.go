package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
)

// TestClient_body_MaxTokens: OpenAI itself gets max_completion_tokens,
// which its reasoning models require; other servers get max_tokens, which
// they all know. The OpenAI path cannot be reached from a test server, so
// this checks the request body directly.
func TestClient_body_MaxTokens(t *testing.T) {
	tests := []struct {
		baseURL, want, absent string
	}{
		{"", "max_completion_tokens", "max_tokens"},
		{"https://api.openai.com/v1", "max_completion_tokens", "max_tokens"},
		{"http://localhost:11434/v1", "max_tokens", "max_completion_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.baseURL, func(t *testing.T) {
			p, err := New(llm.ModelConfig{Name: "gpt-5", BaseURL: tt.baseURL, APIKey: "k", MaxTokens: 512})
			require.NoError(t, err)
			b, err := p.(*Client).body(llm.Request{})
			require.NoError(t, err)
			var body map[string]any
			require.NoError(t, json.Unmarshal(b, &body))
			assert.InDelta(t, 512, body[tt.want], 0)
			assert.NotContains(t, body, tt.absent)
		})
	}
}
