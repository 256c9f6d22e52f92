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
		Providers: map[string]llm.Factory{"scripted": scripted.New},
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
