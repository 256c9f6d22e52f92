package mcp_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

func TestManager_Close(t *testing.T) {
	requireProcfs(t)
	m := mcp.NewManager(mcp.Options{})
	direct := stdioConfig(t, nil)
	pid := mustPID(t, mustTools(t, m, direct))

	// A wrapper shell whose server child ignores stdin closing, like npx
	// running server-everything: only signalling the group reaches it.
	exe, err := os.Executable()
	require.NoError(t, err)
	wrapped := stdioConfig(t, map[string]string{ignoreStdinEnv: "1"})
	wrapped.Name, wrapped.Command, wrapped.Args = "wrapped", "/bin/sh", []string{"-c", `"$0"; exit $?`, exe}
	wrappedTools := mustTools(t, m, wrapped)
	child := mustPID(t, map[string]tools.Tool{"t__pid": wrappedTools["wrapped__pid"]})
	group := procGroup(t, child)
	require.NotEqual(t, child, group, "the server runs under the shell, which leads the group")

	began := time.Now()
	require.NoError(t, m.Close(t.Context()))
	took := time.Since(began)
	t.Logf("Close took %s", took)
	assert.Less(t, took, 3*time.Second)

	assert.True(t, processGone(pid), "the direct server %d is gone", pid)
	assert.True(t, processGone(child), "the wrapped server %d is gone", child)
	assert.True(t, processGone(group), "the wrapper shell %d is gone", group)
	assert.Empty(t, liveGroupMembers(t, pid), "nothing left in the direct server's group")
	assert.Empty(t, liveGroupMembers(t, group), "nothing left in the wrapper's group")

	state, err := m.Status(direct)
	assert.Equal(t, "stopped", state)
	assert.NoError(t, err)
	_, err = m.Tools(t.Context(), direct)
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
	require.NoError(t, m.Close(t.Context()), "Close twice")
}

func TestManager_Close_DuringCall(t *testing.T) {
	// Close cancels calls in flight before it closes the session, which
	// would otherwise wait for them, so they end at once. Over HTTP, Close
	// itself may still wait: the SDK's own server answers the session DELETE
	// only once its handlers end, unless the call's cancellation got there
	// first, and the SDK gives that DELETE 5s.
	limits := map[string]time.Duration{"stdio": time.Second, "http": 6 * time.Second}
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.config(t)
			m := mcp.NewManager(mcp.Options{})
			byName := mustTools(t, m, cfg)
			ended := make(chan error, 1)
			go func() {
				_, err := call(t, byName["t__sleep"], map[string]any{"ms": 2000})
				ended <- err
			}()
			time.Sleep(100 * time.Millisecond) // let the call reach the server

			began := time.Now()
			closed := make(chan error, 1)
			go func() { closed <- m.Close(context.Background()) }()
			select {
			case err := <-ended:
				require.ErrorIs(t, err, errdefs.ErrUnavailable)
				assert.Less(t, time.Since(began), 500*time.Millisecond)
			case <-time.After(5 * time.Second):
				t.Fatal("the call did not end when the manager closed")
			}
			require.NoError(t, <-closed)
			t.Logf("Close took %s", time.Since(began))
			assert.Less(t, time.Since(began), limits[tc.name])
		})
	}
}

func TestManager_Close_DuringStart(t *testing.T) {
	m := mcp.NewManager(mcp.Options{})
	// A server that reads requests and never answers (shell builtins only).
	cfg := mcp.ServerConfig{Name: "silent", Command: "/bin/sh", Args: []string{"-c", "while read -r line; do :; done"}}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Tools(context.Background(), cfg)
		errc <- err
	}()
	require.Eventually(t, func() bool {
		state, _ := m.Status(cfg)
		return state == "starting"
	}, 2*time.Second, 5*time.Millisecond)

	began := time.Now()
	require.NoError(t, m.Close(t.Context()))
	assert.Less(t, time.Since(began), 3*time.Second)
	assert.Error(t, <-errc)
}

func TestManager_Close_Timeout(t *testing.T) {
	m := mcp.NewManager(mcp.Options{})
	mustTools(t, m, stdioConfig(t, map[string]string{ignoreStdinEnv: "1"}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	err := m.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "stopping a server that ignores stdin takes longer")
	require.NoError(t, m.Close(t.Context()), "a second Close waits for the first")
}

func TestManager_HTTP(t *testing.T) {
	t.Run("Headers", func(t *testing.T) {
		ts := mcptest.ServeHTTP(t)
		m := mcp.NewManager(mcp.Options{})
		cfg := mcp.ServerConfig{Name: "t", URL: ts.URL, Headers: map[string]string{
			"Authorization": "Bearer s3cret",
			"X-Kerneld":     "yes",
		}}
		got, err := call(t, mustTools(t, m, cfg)["t__echo"], map[string]any{"message": "hi"})
		require.NoError(t, err)
		assert.Equal(t, "hi", got)
		require.NoError(t, m.Close(t.Context()))

		reqs := ts.RequestHeaders()
		require.GreaterOrEqual(t, len(reqs), 3, "initialize, list, call and more")
		for i, h := range reqs {
			assert.Equal(t, "Bearer s3cret", h.Get("Authorization"), "request %d", i)
			assert.Equal(t, "yes", h.Get("X-Kerneld"), "request %d", i)
		}
	})
	t.Run("ServerGone", func(t *testing.T) {
		ts := mcptest.ServeHTTP(t)
		m := mustNewManager(t, mcp.Options{MinBackoff: time.Minute})
		cfg := mcp.ServerConfig{Name: "t", URL: ts.URL, CallTimeout: 10 * time.Second}
		echo := mustTools(t, m, cfg)["t__echo"]
		ts.CloseClientConnections()
		ts.Close()

		_, err := call(t, echo, map[string]any{"message": "hi"})
		require.Error(t, err)
		t.Logf("call after the server went: %v", err)
		require.Eventually(t, func() bool {
			state, _ := m.Status(cfg)
			return state == "failed"
		}, 5*time.Second, 10*time.Millisecond)
		began := time.Now()
		_, err = call(t, echo, map[string]any{"message": "hi"})
		require.ErrorContains(t, err, "next start in")
		assert.Less(t, time.Since(began), 50*time.Millisecond, "a server that is down fails fast")
	})
}
