package mcp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// TestManager_Retain: after the agents are reloaded, the servers no agent
// names any more stop, their calls in flight and later ones fail saying so,
// and the servers still named keep running.
func TestManager_Retain(t *testing.T) {
	requireProcfs(t)
	m := mustNewManager(t, mcp.Options{})
	kept := stdioConfig(t, nil)
	dropped := stdioConfig(t, map[string]string{"KERNELD_TEST_COPY": "2"}) // another configuration
	dropped.Name = "dropped"
	keptTools, droppedTools := mustTools(t, m, kept), mustTools(t, m, dropped)
	keptPID := mustPID(t, keptTools)
	droppedPID := mustPID(t, map[string]tools.Tool{"t__pid": droppedTools["dropped__pid"]})

	inFlight := make(chan error, 1)
	go func() {
		_, err := call(t, droppedTools["dropped__sleep"], map[string]any{"ms": 5000})
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the call reach the server

	assert.Equal(t, []string{"dropped"}, m.Retain([]mcp.ServerConfig{kept}))
	select {
	case err := <-inFlight:
		require.ErrorIs(t, err, errdefs.ErrUnavailable)
		assert.Contains(t, err.Error(), `mcp server "dropped" is no longer configured`)
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not end when its server was dropped")
	}
	_, err := call(t, droppedTools["dropped__echo"], map[string]any{"message": "hi"})
	require.ErrorIs(t, err, errdefs.ErrUnavailable, "a later call through the dropped server's tools")
	assert.Contains(t, err.Error(), "no longer configured")
	assert.Eventually(t, func() bool { return processGone(droppedPID) }, 5*time.Second, 10*time.Millisecond,
		"the dropped server's process %d is gone", droppedPID)
	state, err := m.Status(dropped)
	assert.Equal(t, "stopped", state)
	assert.NoError(t, err)

	assert.Equal(t, keptPID, mustPID(t, keptTools), "the kept server runs on, the same process")
	assert.Empty(t, m.Retain([]mcp.ServerConfig{kept}), "nothing more to stop")

	again := mustTools(t, m, dropped) // configured again by a later reload
	assert.NotEqual(t, droppedPID, mustPID(t, map[string]tools.Tool{"t__pid": again["dropped__pid"]}), "a new process")
}
