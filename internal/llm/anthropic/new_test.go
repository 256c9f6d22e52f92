package anthropic_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
)

func TestNew(t *testing.T) {
	temp := 0.5
	tests := []struct {
		name     string
		cfg      llm.ModelConfig
		wantErr  string // "" for success
		wantKind error
	}{
		{name: "key", cfg: llm.ModelConfig{Name: "claude-sonnet-4-5", APIKey: testKey}},
		{name: "thinking", cfg: llm.ModelConfig{Name: "claude-sonnet-4-5", APIKey: testKey, Options: map[string]any{"thinking_budget": 2048}}},
		{name: "no key is unavailable", cfg: llm.ModelConfig{Name: "claude-sonnet-4-5"},
			wantErr: "model.api_key is empty", wantKind: errdefs.ErrUnavailable},
		{name: "no key is unavailable, with a base_url too", cfg: llm.ModelConfig{Name: "claude-sonnet-4-5", BaseURL: "http://localhost:8080"},
			wantErr: "model.api_key is empty", wantKind: errdefs.ErrUnavailable},
		{name: "no model name", cfg: llm.ModelConfig{APIKey: testKey}, wantErr: "invalid name: required", wantKind: errdefs.ErrInvalid},
		{name: "thinking budget too small", cfg: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking_budget": 512}},
			wantErr: "invalid thinking_budget: must be at least 1024", wantKind: errdefs.ErrInvalid},
		{name: "thinking budget over max_tokens", cfg: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking_budget": 4096}},
			wantErr: "invalid thinking_budget: must be less than max_tokens (4096)", wantKind: errdefs.ErrInvalid},
		{name: "thinking with temperature", cfg: llm.ModelConfig{Name: "c", APIKey: testKey, Temperature: &temp, Options: map[string]any{"thinking_budget": 2048}},
			wantErr: "invalid thinking_budget: cannot be combined with temperature: extended thinking uses the default", wantKind: errdefs.ErrInvalid},
		{name: "thinking budget not a number", cfg: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking_budget": "lots"}},
			wantErr: "invalid thinking_budget: cannot unmarshal !!str `lots` into int", wantKind: errdefs.ErrInvalid},
		{name: "unknown option", cfg: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking": true}},
			wantErr: "invalid thinking: unknown option (known: max_retries, thinking_budget, timeout)", wantKind: errdefs.ErrInvalid},
		{name: "bad base_url", cfg: llm.ModelConfig{Name: "c", APIKey: testKey, BaseURL: "api.anthropic.com"},
			wantErr: "invalid base_url: must be an http or https URL such as https://api.anthropic.com", wantKind: errdefs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := anthropic.New(tt.cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.NotNil(t, p)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			assert.ErrorIs(t, err, tt.wantKind)
		})
	}
}
