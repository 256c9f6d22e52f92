package mcp_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

func TestManager_Tools(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.config(t) // before the manager, so it is closed after it
			m := mustNewManager(t, mcp.Options{})
			state, err := m.Status(cfg)
			assert.Equal(t, "stopped", state)
			assert.NoError(t, err)

			byName := mustTools(t, m, cfg)
			assert.Equal(t, []string{"t__crash", "t__echo", "t__fail", "t__pid", "t__sleep"}, sortedNames(byName))
			safe := map[string]bool{}
			for name, tool := range byName {
				safe[name] = tool.Definition().RetrySafe
			}
			assert.Equal(t, map[string]bool{"t__crash": false, "t__echo": true, "t__fail": false, "t__pid": false, "t__sleep": true}, safe,
				"safe to retry: readOnlyHint (echo) or idempotentHint (sleep), nothing else")
			def := byName["t__echo"].Definition()
			assert.Equal(t, "Returns its message.", def.Description)
			var schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			require.NoError(t, json.Unmarshal(def.Parameters, &schema))
			assert.Equal(t, "object", schema.Type)
			assert.Contains(t, schema.Properties, "message")
			assert.Equal(t, []string{"message"}, schema.Required)

			state, err = m.Status(cfg)
			assert.Equal(t, "running", state)
			assert.NoError(t, err)
		})
	}
}

func TestTool_Call(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.config(t) // before the manager, so it is closed after it
			m := mustNewManager(t, mcp.Options{})
			cfg.CallTimeout = 300 * time.Millisecond
			byName := mustTools(t, m, cfg)

			t.Run("Echo", func(t *testing.T) {
				got, err := call(t, byName["t__echo"], map[string]any{"message": "hello"})
				require.NoError(t, err)
				assert.Equal(t, "hello", got)
			})
			t.Run("EmptyArguments", func(t *testing.T) {
				got, err := byName["t__pid"].Call(t.Context(), tools.Call{})
				require.NoError(t, err)
				assert.NotEmpty(t, got)
			})
			t.Run("IsError", func(t *testing.T) {
				_, err := call(t, byName["t__fail"], map[string]any{})
				require.Error(t, err)
				assert.Equal(t, "it failed on purpose", err.Error())
			})
			t.Run("Timeout", func(t *testing.T) {
				began := time.Now()
				_, err := call(t, byName["t__sleep"], map[string]any{"ms": 10_000})
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Contains(t, err.Error(), "timed out after 300ms")
				assert.Less(t, time.Since(began), 2*time.Second)
				got, err := call(t, byName["t__echo"], map[string]any{"message": "still up"})
				require.NoError(t, err, "a timeout must not take the server down")
				assert.Equal(t, "still up", got)
			})
			t.Run("InvalidArguments", func(t *testing.T) {
				_, err := byName["t__echo"].Call(t.Context(), tools.Call{Arguments: json.RawMessage(`["not", "an", "object"]`)})
				require.ErrorIs(t, err, errdefs.ErrInvalid)
				_, err = call(t, byName["t__echo"], map[string]any{"message": 42})
				require.Error(t, err, "the server rejects arguments that do not match the schema")
				state, _ := m.Status(cfg)
				assert.Equal(t, "running", state, "an error answer must not take the server down")
			})
		})
	}
}

func TestTool_Call_Crash(t *testing.T) {
	requireProcfs(t)
	m := mustNewManager(t, mcp.Options{MinBackoff: 300 * time.Millisecond})
	cfg := stdioConfig(t, nil)
	byName := mustTools(t, m, cfg)
	pid := mustPID(t, byName)

	began := time.Now()
	_, err := call(t, byName["t__crash"], map[string]any{})
	require.ErrorIs(t, err, errdefs.ErrUpstream)
	assert.Less(t, time.Since(began), 2*time.Second)
	state, err := m.Status(cfg)
	assert.Equal(t, "failed", state)
	assert.ErrorContains(t, err, "crashed")

	t.Run("DownFailsFast", func(t *testing.T) {
		began := time.Now()
		_, err := call(t, byName["t__echo"], map[string]any{"message": "hi"})
		require.ErrorContains(t, err, "next start in")
		assert.Less(t, time.Since(began), 50*time.Millisecond)
	})
	t.Run("RestartsAfterBackoff", func(t *testing.T) {
		time.Sleep(300 * time.Millisecond)
		got, err := call(t, byName["t__echo"], map[string]any{"message": "hi again"})
		require.NoError(t, err)
		assert.Equal(t, "hi again", got)
		assert.NotEqual(t, pid, mustPID(t, byName), "a new process")
		assert.Eventually(t, func() bool { return processGone(pid) }, 2*time.Second, 10*time.Millisecond)
	})
}

func TestManager_Tools_Backoff(t *testing.T) {
	t.Run("CommandNotFound", func(t *testing.T) {
		m := mustNewManager(t, mcp.Options{})
		cfg := mcp.ServerConfig{Name: "nope", Command: filepath.Join(t.TempDir(), "no-such-server")}
		_, err := m.Tools(t.Context(), cfg)
		require.ErrorContains(t, err, "no-such-server")
		state, err := m.Status(cfg)
		assert.Equal(t, "failed", state)
		assert.Error(t, err)
	})
	t.Run("ExitsAtOnce", func(t *testing.T) {
		const minBackoff = 300 * time.Millisecond
		m := mustNewManager(t, mcp.Options{MinBackoff: minBackoff, MaxBackoff: 10 * time.Second})
		starts := filepath.Join(t.TempDir(), "starts")
		cfg := mcp.ServerConfig{
			Name:    "exits",
			Command: "/bin/sh",
			Args:    []string{"-c", `echo start >> "$STARTS"; exit 1`},
			Env:     map[string]string{"STARTS": starts},
		}
		_, err := m.Tools(t.Context(), cfg)
		failed := time.Now() // the backoff runs from the failure
		require.ErrorIs(t, err, errdefs.ErrUpstream)
		require.Equal(t, 1, countLines(t, starts))

		began := time.Now()
		_, err = m.Tools(t.Context(), cfg)
		require.ErrorContains(t, err, "next start in")
		assert.Less(t, time.Since(began), 50*time.Millisecond, "within the backoff Tools fails fast")
		assert.Equal(t, 1, countLines(t, starts), "and does not start the server")

		time.Sleep(time.Until(failed.Add(minBackoff)))
		_, err = m.Tools(t.Context(), cfg)
		failed = time.Now()
		require.Error(t, err)
		assert.Equal(t, 2, countLines(t, starts), "after the backoff it starts the server again")

		time.Sleep(time.Until(failed.Add(minBackoff)))
		_, err = m.Tools(t.Context(), cfg)
		require.ErrorContains(t, err, "next start in")
		assert.Equal(t, 2, countLines(t, starts), "the second backoff is twice the first")
		time.Sleep(time.Until(failed.Add(2 * minBackoff)))
		_, err = m.Tools(t.Context(), cfg)
		require.Error(t, err)
		assert.Equal(t, 3, countLines(t, starts))
	})
}

func TestManager_Tools_Concurrent(t *testing.T) {
	m := mustNewManager(t, mcp.Options{})
	starts := filepath.Join(t.TempDir(), "starts")
	cfg := stdioConfig(t, map[string]string{startsEnv: starts})

	const callers = 20
	var wg sync.WaitGroup
	errs := make([]error, callers)
	counts := make([]int, callers)
	for i := range callers {
		wg.Go(func() {
			ts, err := m.Tools(t.Context(), cfg)
			errs[i], counts[i] = err, len(ts)
		})
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		assert.Equal(t, 5, counts[i])
	}
	assert.Equal(t, 1, countLines(t, starts), "one start shared by every caller")
}

func TestManager_Tools_SharedByConfig(t *testing.T) {
	m := mustNewManager(t, mcp.Options{})
	starts := filepath.Join(t.TempDir(), "starts")
	cfg := stdioConfig(t, map[string]string{startsEnv: starts})

	slow := cfg
	slow.CallTimeout = time.Hour
	mustTools(t, m, cfg)
	mustTools(t, m, slow)
	assert.Equal(t, 1, countLines(t, starts), "configs that differ only in CallTimeout share a server")

	other := stdioConfig(t, map[string]string{startsEnv: starts, "EXTRA": "1"})
	mustTools(t, m, other)
	assert.Equal(t, 2, countLines(t, starts), "a different environment is a different server")
}
