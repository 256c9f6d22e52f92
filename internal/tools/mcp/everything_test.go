package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/tools/mcp"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// secretEnv stands for a model API key in kerneld's environment.
const secretEnv, secretValue = "KERNELD_TEST_SECRET_KEY", "sk-must-not-leak"

func TestEverything(t *testing.T) {
	t.Setenv(secretEnv, secretValue)
	command, args := mcptest.Everything(t)
	cfg := mcp.ServerConfig{Name: "everything", Command: command, Args: args}
	cfg.CallTimeout = 500 * time.Millisecond
	m := mustNewManager(t, mcp.Options{})
	began := time.Now()
	byName := mustTools(t, m, cfg)
	t.Logf("start took %s", time.Since(began))

	t.Run("Tools", func(t *testing.T) {
		require.Contains(t, byName, "everything__echo")
		for name := range byName {
			assert.Regexp(t, `^everything__[a-z-]+$`, name)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(byName["everything__echo"].Definition().Parameters, &schema))
		assert.Contains(t, schema.Properties, "message")
		assert.NotEmpty(t, byName["everything__echo"].Definition().Description)
	})
	t.Run("SafeToRetry", func(t *testing.T) {
		// The reference server annotates its tools: echo only reads,
		// gzip-file-as-resource writes but idempotently, and
		// toggle-simulated-logging neither.
		for name, want := range map[string]bool{"echo": true, "gzip-file-as-resource": true, "toggle-simulated-logging": false} {
			tool := byName["everything__"+name]
			require.NotNil(t, tool, "the reference server has no tool %s", name)
			assert.Equal(t, want, tool.Definition().RetrySafe, "%s safe to retry", name)
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		// Only readOnlyHint makes a tool read-only: gzip-file-as-resource
		// is idempotent but writes.
		for name, want := range map[string]bool{"echo": true, "gzip-file-as-resource": false, "toggle-simulated-logging": false} {
			assert.Equal(t, want, byName["everything__"+name].Definition().ReadOnly, "%s read-only", name)
		}
	})
	t.Run("Echo", func(t *testing.T) {
		got, err := call(t, byName["everything__echo"], map[string]any{"message": "hi"})
		require.NoError(t, err)
		assert.Equal(t, "Echo: hi", got)
	})
	t.Run("Timeout", func(t *testing.T) {
		long := byName["everything__trigger-long-running-operation"]
		began := time.Now()
		_, err := call(t, long, map[string]any{"duration": 5, "steps": 5}) // seconds
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(began), 2*time.Second)
		got, err := call(t, byName["everything__echo"], map[string]any{"message": "after"})
		require.NoError(t, err, "the server survives a timed-out call")
		assert.Equal(t, "Echo: after", got)
	})
	t.Run("Environment", func(t *testing.T) {
		got, err := call(t, byName["everything__get-env"], map[string]any{})
		require.NoError(t, err)
		assert.Contains(t, got, `"PATH"`)
		assert.NotContains(t, got, secretEnv, "kerneld's own variables stay with kerneld")
		assert.NotContains(t, got, secretValue)
	})
	t.Run("MissingArgument", func(t *testing.T) {
		_, err := call(t, byName["everything__echo"], map[string]any{})
		require.Error(t, err)
		t.Logf("echo without its message: %v", err)
		state, _ := m.Status(cfg)
		assert.Equal(t, "running", state)
	})
	t.Run("Close", func(t *testing.T) {
		requireProcfs(t)
		pid := childRunning(t, cfg.Args[0])
		began := time.Now()
		require.NoError(t, m.Close(t.Context()))
		took := time.Since(began)
		t.Logf("Close took %s", took)
		assert.Less(t, took, 2*time.Second)
		assert.True(t, processGone(pid), "node %d is gone", pid)
		assert.Empty(t, liveGroupMembers(t, pid), "nothing left in its process group")
	})
}

// TestEverything_Npx starts the reference server the way its README and
// most agent files do, through npx. npx runs node as a grandchild that
// ignores stdin closing: Close must still leave nothing of it behind.
func TestEverything_Npx(t *testing.T) {
	command, args := mcptest.EverythingNpx(t)
	requireProcfs(t)
	cfg := mcp.ServerConfig{Name: "everything", Command: command, Args: args}
	m := mustNewManager(t, mcp.Options{})
	byName := mustTools(t, m, cfg)
	got, err := call(t, byName["everything__echo"], map[string]any{"message": "via npx"})
	require.NoError(t, err)
	assert.Equal(t, "Echo: via npx", got)

	pid := childRunning(t, "mcp-server-everything")
	require.NoError(t, m.Close(t.Context()))
	assert.True(t, processGone(pid), "npx %d is gone", pid)
	assert.Empty(t, liveGroupMembers(t, pid), "no node process is left in its group")
}

// childRunning finds the child of this process whose command line
// mentions needle.
func childRunning(tb testing.TB, needle string) int {
	tb.Helper()
	for _, pid := range childPIDs(tb) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), needle) {
			return pid
		}
	}
	tb.Fatalf("no child process mentions %s", needle)
	return 0
}
