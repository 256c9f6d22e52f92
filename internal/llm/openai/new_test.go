package openai_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/llm/openai"
)

func TestNew(t *testing.T) {
	llmtest.CheckConfigs(t, openai.New, []llmtest.ConfigCase{
		{Name: "OpenAI with a key", Config: llm.ModelConfig{Name: "gpt-4o-mini", APIKey: testKey}},
		{Name: "local server without a key", Config: llm.ModelConfig{Name: "llama3.2", BaseURL: "http://localhost:11434/v1"}},
		{Name: "options", Config: llm.ModelConfig{Name: "gpt-4o-mini", APIKey: testKey, Options: map[string]any{"timeout": "30s", "max_retries": 5}}},
		{Name: "no key and no base_url is unavailable", Config: llm.ModelConfig{Name: "gpt-4o-mini"},
			WantErr: "model.api_key is empty", WantKind: errdefs.ErrUnavailable, WantCode: "missing_api_key"},
		{Name: "no model name", Config: llm.ModelConfig{APIKey: testKey},
			WantErr: "invalid name: required", WantKind: errdefs.ErrInvalid},
		{Name: "no model name comes before a missing key", Config: llm.ModelConfig{},
			WantErr: "invalid name: required", WantKind: errdefs.ErrInvalid},
		{Name: "unknown option", Config: llm.ModelConfig{Name: "m", APIKey: testKey, Options: map[string]any{"thinking_budget": 1024}},
			WantErr: "invalid thinking_budget: unknown option (known: max_retries, timeout)", WantKind: errdefs.ErrInvalid},
		{Name: "bad timeout", Config: llm.ModelConfig{Name: "m", APIKey: testKey, Options: map[string]any{"timeout": "soon"}},
			WantErr: `invalid timeout: must be a duration such as 90s, got "soon"`, WantKind: errdefs.ErrInvalid},
		{Name: "bad base_url", Config: llm.ModelConfig{Name: "m", BaseURL: "localhost:11434"},
			WantErr: "invalid base_url: must be an http or https URL such as http://localhost:11434/v1", WantKind: errdefs.ErrInvalid},
	})
}
