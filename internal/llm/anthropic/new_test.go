package anthropic_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

func TestNew(t *testing.T) {
	temp := 0.5
	llmtest.CheckConfigs(t, anthropic.New, []llmtest.ConfigCase{
		{Name: "key", Config: llm.ModelConfig{Name: "claude-sonnet-4-5", APIKey: testKey}},
		{Name: "thinking", Config: llm.ModelConfig{Name: "claude-sonnet-4-5", APIKey: testKey, Options: map[string]any{"thinking_budget": 2048}}},
		{Name: "no key is unavailable", Config: llm.ModelConfig{Name: "claude-sonnet-4-5"},
			WantErr: "model.api_key is empty", WantKind: errdefs.ErrUnavailable, WantCode: "missing_api_key"},
		{Name: "no key is unavailable, with a base_url too", Config: llm.ModelConfig{Name: "claude-sonnet-4-5", BaseURL: "http://localhost:8080"},
			WantErr: "model.api_key is empty", WantKind: errdefs.ErrUnavailable, WantCode: "missing_api_key"},
		{Name: "no model name", Config: llm.ModelConfig{APIKey: testKey}, WantErr: "invalid name: required", WantKind: errdefs.ErrInvalid},
		{Name: "thinking budget too small", Config: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking_budget": 512}},
			WantErr: "invalid thinking_budget: must be at least 1024", WantKind: errdefs.ErrInvalid},
		{Name: "thinking budget over max_tokens", Config: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking_budget": 4096}},
			WantErr: "invalid thinking_budget: must be less than max_tokens (4096)", WantKind: errdefs.ErrInvalid},
		{Name: "thinking with temperature", Config: llm.ModelConfig{Name: "c", APIKey: testKey, Temperature: &temp, Options: map[string]any{"thinking_budget": 2048}},
			WantErr: "invalid thinking_budget: cannot be combined with temperature: extended thinking uses the default", WantKind: errdefs.ErrInvalid},
		{Name: "thinking budget not a number", Config: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking_budget": "lots"}},
			WantErr: "invalid thinking_budget: cannot unmarshal !!str `lots` into int", WantKind: errdefs.ErrInvalid},
		{Name: "unknown option", Config: llm.ModelConfig{Name: "c", APIKey: testKey, Options: map[string]any{"thinking": true}},
			WantErr: "invalid thinking: unknown option (known: max_retries, thinking_budget, timeout)", WantKind: errdefs.ErrInvalid},
		{Name: "bad base_url", Config: llm.ModelConfig{Name: "c", APIKey: testKey, BaseURL: "api.anthropic.com"},
			WantErr: "invalid base_url: must be an http or https URL such as https://api.anthropic.com", WantKind: errdefs.ErrInvalid},
	})
}
