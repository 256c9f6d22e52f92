package agents_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/openai"
	"github.com/kerneld/kerneld/internal/llm/scripted"
)

// repoAgentsDir returns the repository's configs/agents, found from this
// file so the test does not depend on the working directory.
func repoAgentsDir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok, "locate test file")
	return filepath.Join(filepath.Dir(file), "..", "..", "configs", "agents")
}

// TestLoad_RepositoryAgents keeps the shipped agent files loadable with
// the providers and tools kerneld builds in.
func TestLoad_RepositoryAgents(t *testing.T) {
	r, err := agents.Load(repoAgentsDir(t), agents.Options{
		Providers: map[string]llm.Factory{"scripted": scripted.New, "openai": openai.New, "anthropic": anthropic.New},
		KnownTool: func(name string) bool { return builtinTools[name] },
		Getenv:    func(string) string { return "" },
	})
	require.NoError(t, err)

	echo, err := r.Get("echo")
	require.NoError(t, err)
	assert.Equal(t, "Echoes your input back, token by token.", echo.Description)
	assert.Equal(t, "scripted", echo.Model.Provider)
	for _, tool := range []string{"current_time", "memory_get", "memory_set"} {
		_, ok := echo.Tool(tool)
		assert.True(t, ok, "echo lists %s", tool)
	}

	var text strings.Builder
	err = echo.Provider.Stream(t.Context(), llm.Request{RunInput: "hello kerneld"}, func(c llm.Chunk) error {
		text.WriteString(c.Text)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, "hello kerneld", text.String(), "echo streams its input back")
}

// TestLoad_RepositoryModelAgents: without API keys the shipped agents on
// real models load as unavailable, naming the variable to set, and with a
// key they are available.
func TestLoad_RepositoryModelAgents(t *testing.T) {
	providers := map[string]llm.Factory{"scripted": scripted.New, "openai": openai.New, "anthropic": anthropic.New}
	load := func(env map[string]string) *agents.Registry {
		r, err := agents.Load(repoAgentsDir(t), agents.Options{
			Providers: providers,
			KnownTool: func(name string) bool { return builtinTools[name] },
			Getenv:    func(k string) string { return env[k] },
		})
		require.NoError(t, err)
		return r
	}
	tests := []struct {
		agent, provider, envVar string
	}{
		{"assistant", "openai", "OPENAI_API_KEY"},
		{"claude", "anthropic", "ANTHROPIC_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.agent, func(t *testing.T) {
			spec, err := load(nil).Get(tt.agent)
			require.NoError(t, err)
			assert.Equal(t, tt.provider, spec.Model.Provider)
			assert.Nil(t, spec.Provider)
			assert.Contains(t, spec.Unavailable, tt.envVar)
			for _, tool := range []string{"current_time", "memory_get", "memory_set"} {
				_, ok := spec.Tool(tool)
				assert.True(t, ok, "%s lists %s", tt.agent, tool)
			}

			spec, err = load(map[string]string{tt.envVar: "test-key"}).Get(tt.agent)
			require.NoError(t, err)
			assert.Empty(t, spec.Unavailable)
			assert.NotNil(t, spec.Provider)
		})
	}

	t.Run("assistant on a local server", func(t *testing.T) {
		spec, err := load(nil).Get("assistant")
		require.NoError(t, err)
		assert.Contains(t, spec.Unavailable, "OPENAI_BASE_URL", "the reason names the other way out")
		spec, err = load(map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1"}).Get("assistant")
		require.NoError(t, err)
		assert.Empty(t, spec.Unavailable, "a local server needs no key")
		assert.Equal(t, "http://localhost:11434/v1", spec.Model.BaseURL)
	})
}

// TestLoad_RepositoryGatedAgent: the shipped approvals demo closes with
// words that say whether the note was saved.
func TestLoad_RepositoryGatedAgent(t *testing.T) {
	r, err := agents.Load(repoAgentsDir(t), agents.Options{
		Providers: map[string]llm.Factory{"scripted": scripted.New, "openai": openai.New, "anthropic": anthropic.New},
		KnownTool: func(name string) bool { return builtinTools[name] },
		Getenv:    func(string) string { return "" },
	})
	require.NoError(t, err)
	gated, err := r.Get("gated")
	require.NoError(t, err)
	for result, want := range map[string]string{`{"ok":true}`: "Saved your note.", "denied": "Not saved: you denied it.", "denied: not now": "Not saved: you denied it."} {
		var text strings.Builder
		req := llm.Request{Turn: 1, RunInput: "buy milk", Messages: []llm.Message{{Role: llm.RoleTool, Content: result}}}
		require.NoError(t, gated.Provider.Stream(t.Context(), req, func(c llm.Chunk) error {
			text.WriteString(c.Text)
			return nil
		}))
		assert.Equal(t, want, text.String(), "after the result %q", result)
	}
}
