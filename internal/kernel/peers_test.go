package kernel_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
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

// spawnerPeer spawns two waiter children in the background in one turn,
// allows maxChildren open children, and takes turns with peer. The
// children wait until cancelled, so the first is still open when the
// second is counted.
func spawnerPeer(name, peer, maxChildren string) string {
	return `
name: ` + name + `
model:
  provider: scripted
  script:
    - {tool_calls: [{name: spawn_agent, arguments: {agent: waiter, input: a, wait: false}}, {name: spawn_agent, arguments: {agent: waiter, input: b, wait: false}}]}
    - {text: "Spawned."}
tools: [spawn_agent, wait, current_time, memory_get, memory_set]
child_agents: [waiter]
peers: [` + peer + `]
limits: {max_children: ` + maxChildren + `}
`
}

// TestPeers_LimitsPerAgent: the children a run spawns are bounded by the
// max_children of the agent whose turn it is, not the session's agent's:
// a guest allowed two spawns two on a session whose own agent allows one,
// and the host's own run there is still held to one.
func TestPeers_LimitsPerAgent(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{Agents: []string{kerneltest.Waiter,
		spawnerPeer("host", "guest", "1"), spawnerPeer("guest", "host", "2")}})
	spawned := func(agent string) []bool {
		s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "host", Agents: []string{"guest"}})
		require.NoError(t, err)
		run, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "go", Agent: agent})
		require.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
		_, errs := spawnResults(logOf(t, k.Kernel, s.ID))
		return errs
	}
	assert.Equal(t, []bool{false, false}, spawned("guest"), "the guest's max_children of 2 applies")
	assert.ElementsMatch(t, []bool{false, true}, spawned("host"), "the host's max_children of 1 applies")
}

// TestPeers_ChildResultToSpawner: the answer of a background child that a
// guest's turn started goes back to the guest, not to the session's agent.
func TestPeers_ChildResultToSpawner(t *testing.T) {
	guest := `
name: guest
model:
  provider: scripted
  script:
    - {tool_calls: [{name: spawn_agent, arguments: {agent: echo, input: "hi there", wait: false}}]}
    - {text: "Started."}
  replies: [{starts_with: "[child_result]", text: "Got the result."}]
tools: [spawn_agent, current_time, memory_get, memory_set]
child_agents: [echo]
peers: [host]
`
	host := "name: host\nmodel: {provider: scripted, script: [{text: \"Host.\"}]}\npeers: [guest]\n"
	k, rec := newKernel(t, kerneltest.Options{Agents: []string{kerneltest.Echo, host, guest}})
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "host", Agents: []string{"guest"}})
	require.NoError(t, err)
	run, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "go", Agent: "guest"})
	require.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
	result := waitChildResult(t, k.Kernel, rec, s.ID)
	assert.Equal(t, session.RunSucceeded, result.State)
	assert.Equal(t, "guest", result.Agent, "the agent that spawned the child hears its answer")
	verifiedLog(t, k.Kernel, s.ID)
}

// TestPeers_MCPNameClash: a session's MCP server named like an MCP server
// of another agent that takes turns on it is refused when the session
// lists the agent, when it is attached, and, should the agent's file gain
// such a server later, when a run names that agent; the problem names the
// server and the agent.
func TestPeers_MCPNameClash(t *testing.T) {
	guest := func(servers string) string {
		return "name: guest\nmodel: {provider: scripted, script: [{text: \"Guest.\"}]}\npeers: [host]\n" + servers
	}
	withDocs := "mcp_servers: [{name: docs, url: \"http://127.0.0.1:1/mcp\"}]\n"
	host := "name: host\nmodel: {provider: scripted, script: [{text: \"Host.\"}]}\npeers: [guest]\n"
	k, rec := newKernel(t, kerneltest.Options{Agents: []string{host, guest(withDocs)}, SessionMCP: sessionMCPConfig()})
	docs := []session.MCPServer{{Name: "docs", URL: "https://example.com/mcp"}}
	clash := func(err error) {
		t.Helper()
		require.Equal(t, errdefs.CodeMCPServerNameTaken, errdefs.CodeOf(err), "%v", err)
		assert.Contains(t, err.Error(), `"docs"`)
		assert.Contains(t, err.Error(), `"guest"`)
	}

	_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "host", Agents: []string{"guest"}, MCPServers: docs})
	clash(err)
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "host", MCPServers: docs})
	require.NoError(t, err, "the host has no server of that name")
	_, err = k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{Agents: &[]string{"guest"}})
	clash(err)
	other, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "host", Agents: []string{"guest"}})
	require.NoError(t, err)
	_, err = k.UpdateSession(t.Context(), other.ID, kernel.SessionUpdate{MCPServers: &docs})
	clash(err)

	require.NoError(t, os.WriteFile(filepath.Join(k.AgentsDir, "agent1.yaml"), []byte(guest("")), 0o600))
	_, err = k.ReloadAgents()
	require.NoError(t, err)
	_, err = k.UpdateSession(t.Context(), other.ID, kernel.SessionUpdate{MCPServers: &docs})
	require.NoError(t, err, "the guest has no server of that name any more")
	require.NoError(t, os.WriteFile(filepath.Join(k.AgentsDir, "agent1.yaml"), []byte(guest(withDocs)), 0o600))
	_, err = k.ReloadAgents()
	require.NoError(t, err)
	_, _, err = k.Run(t.Context(), other.ID, kernel.RunRequest{Input: "hi", Agent: "guest"})
	clash(err)
	assert.Equal(t, session.RunSucceeded, runToEnd(t, k.Kernel, rec, other.ID, "hi").State, "the host still runs with the session's server")
}
