package llm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// yamlOptions decodes YAML text into the map ModelConfig.Options carries.
func yamlOptions(tb testing.TB, text string) map[string]any {
	tb.Helper()
	var m map[string]any
	require.NoError(tb, yaml.Unmarshal([]byte(text), &m))
	return m
}

func TestDecodeOptions(t *testing.T) {
	tests := []struct {
		name        string
		yaml        string
		wantTimeout time.Duration
		wantRetries int
		wantBudget  int
		wantErr     string // "" for success
	}{
		{"defaults", "", 120 * time.Second, 3, 0, ""},
		{"all set", "{timeout: 30s, max_retries: 0, thinking_budget: 2048}", 30 * time.Second, 0, 2048, ""},
		{"unknown option", "{timeot: 30s}", 0, 0, 0, "invalid timeot: unknown option (known: max_retries, thinking_budget, timeout)"},
		{"timeout not a duration", "{timeout: 30}", 0, 0, 0, `invalid timeout: must be a duration such as 90s, got "30"`},
		{"timeout zero", "{timeout: 0s}", 0, 0, 0, "invalid timeout: must be positive"},
		{"retries not a number", "{max_retries: many}", 0, 0, 0, "invalid max_retries: cannot unmarshal !!str `many` into int"},
		{"retries negative", "{max_retries: -1}", 0, 0, 0, "invalid max_retries: must be between 0 and 10"},
		{"retries too many", "{max_retries: 11}", 0, 0, 0, "invalid max_retries: must be between 0 and 10"},
		{"extra option of the wrong type", "{thinking_budget: lots}", 0, 0, 0, "invalid thinking_budget: cannot unmarshal !!str `lots` into int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var budget int
			p, err := llm.DecodeOptions(yamlOptions(t, tt.yaml), map[string]any{"thinking_budget": &budget})
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.ErrorIs(t, err, errdefs.ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantTimeout, p.Timeout)
			assert.Equal(t, tt.wantRetries, p.MaxRetries)
			assert.Equal(t, tt.wantBudget, budget)
		})
	}
}

// TestDecodeOptions_Go: options built in Go take the same shapes.
func TestDecodeOptions_Go(t *testing.T) {
	p, err := llm.DecodeOptions(map[string]any{"timeout": 5 * time.Second, "max_retries": 1}, nil)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, p.Timeout)
	assert.Equal(t, 1, p.MaxRetries)
}

func TestCheckBaseURL(t *testing.T) {
	const example = "https://models.example/v1"
	for _, ok := range []string{"", "http://localhost:11434/v1", "https://api.anthropic.com"} {
		assert.NoError(t, llm.CheckBaseURL(ok, example), ok)
	}
	for _, bad := range []string{"localhost:11434", "api.anthropic.com", "ftp://models.example", "https://", "http://[::1"} {
		err := llm.CheckBaseURL(bad, example)
		require.EqualError(t, err, "invalid base_url: must be an http or https URL such as "+example, bad)
		assert.ErrorIs(t, err, errdefs.ErrInvalid)
	}
}

// TestMissingAPIKey: a missing key lists the agent as unavailable, with a
// code a client can act on.
func TestMissingAPIKey(t *testing.T) {
	err := llm.MissingAPIKey("")
	require.EqualError(t, err, "model.api_key is empty")
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.NotErrorIs(t, err, errdefs.ErrInvalid)
	assert.Equal(t, "missing_api_key", string(errdefs.CodeOf(err)))
	e, _ := errors.AsType[*errdefs.Error](llm.MissingAPIKey("model.base_url"))
	require.NotNil(t, e)
	assert.Equal(t, "model.base_url", e.Extra["or_field"], "what would do instead of a key")
}
