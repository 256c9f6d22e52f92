package openai_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/openai"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		cfg      llm.ModelConfig
		wantErr  string // "" for success
		wantKind error
		wantCode string
	}{
		{name: "OpenAI with a key", cfg: llm.ModelConfig{Name: "gpt-4o-mini", APIKey: testKey}},
		{name: "local server without a key", cfg: llm.ModelConfig{Name: "llama3.2", BaseURL: "http://localhost:11434/v1"}},
		{name: "options", cfg: llm.ModelConfig{Name: "gpt-4o-mini", APIKey: testKey, Options: map[string]any{"timeout": "30s", "max_retries": 5}}},
		{name: "no key and no base_url is unavailable", cfg: llm.ModelConfig{Name: "gpt-4o-mini"},
			wantErr: "model.api_key is empty", wantKind: errdefs.ErrUnavailable, wantCode: "missing_api_key"},
		{name: "no model name", cfg: llm.ModelConfig{APIKey: testKey},
			wantErr: "invalid name: required", wantKind: errdefs.ErrInvalid},
		{name: "no model name comes before a missing key", cfg: llm.ModelConfig{},
			wantErr: "invalid name: required", wantKind: errdefs.ErrInvalid},
		{name: "unknown option", cfg: llm.ModelConfig{Name: "m", APIKey: testKey, Options: map[string]any{"thinking_budget": 1024}},
			wantErr: "invalid thinking_budget: unknown option (known: max_retries, timeout)", wantKind: errdefs.ErrInvalid},
		{name: "bad timeout", cfg: llm.ModelConfig{Name: "m", APIKey: testKey, Options: map[string]any{"timeout": "soon"}},
			wantErr: `invalid timeout: must be a duration such as 90s, got "soon"`, wantKind: errdefs.ErrInvalid},
		{name: "bad base_url", cfg: llm.ModelConfig{Name: "m", BaseURL: "localhost:11434"},
			wantErr: "invalid base_url: must be an http or https URL such as http://localhost:11434/v1", wantKind: errdefs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := openai.New(tt.cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.NotNil(t, p)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			assert.ErrorIs(t, err, tt.wantKind)
			assert.Equal(t, tt.wantCode, errdefs.CodeOf(err))
			if !errors.Is(tt.wantKind, errdefs.ErrUnavailable) {
				assert.NotErrorIs(t, err, errdefs.ErrUnavailable, "a wrong file must fail startup")
			}
		})
	}
}
