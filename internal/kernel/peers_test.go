package kernel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

// saverPeer saves a memory key with approval, and takes turns with peer.
func saverPeer(name, peer string) string {
	return `
name: ` + name + `
model: {provider: scripted, script: [{tool_calls: [{name: memory_set, arguments: {key: a, value: 1}}]}, {text: "Saved."}]}
tools: [{name: memory_set, require_approval: true}]
peers: [` + peer + `]
`
}

// TestPeers_ApprovalsPerAgent: an "always" given to one agent's call does
// not approve another agent's calls on the same session.
func TestPeers_ApprovalsPerAgent(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{Agents: []string{saverPeer("host", "guest"), saverPeer("guest", "host")}})
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "host", Agents: []string{"guest"}})
	require.NoError(t, err)

	run := mustRun(t, k.Kernel, s.ID, "save")
	first := waitPending(t, k.Kernel, s.ID, run.ID, 1)[0]
	_, err = k.DecideWith(t.Context(), s.ID, run.ID, first.ToolCallID, kernel.Verdict{Decision: kernel.DecisionAlways})
	require.NoError(t, err)
	waitRun(t, k.Kernel, rec, s.ID, run.ID)
	again := runToEnd(t, k.Kernel, rec, s.ID, "save again")
	assert.Equal(t, session.RunSucceeded, again.State, "the host's standing approval covers the host")

	guest, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "save too", Agent: "guest"})
	asked := waitPending(t, k.Kernel, s.ID, guest.ID, 1)[0]
	_, err = k.Decide(t.Context(), s.ID, guest.ID, asked.ToolCallID, true, "")
	require.NoError(t, err)
	assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, guest.ID).State)
	assert.Equal(t, "guest", mustGetRun(t, k.Kernel, s.ID, guest.ID).Agent)
	verifiedLog(t, k.Kernel, s.ID)
}
