package kernel_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools/mcp"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// mcpAgent is an agent whose model follows script and whose one MCP
// server, "t", is srv.
func mcpAgent(model *recordingProvider, srv agents.MCPServer, refs ...agents.ToolRef) agents.Spec {
	srv.Name = "t"
	return agents.Spec{Name: "mcp", Provider: model, MCPServers: []agents.MCPServer{srv}, Tools: refs}
}

// callsTool is a script that calls name with args, then says "Done."
func callsTool(name string, args map[string]any) []step {
	return []step{{Text: "Calling.", ToolCalls: []scriptedCall{{Name: name, Arguments: args}}}, {Text: "Done."}}
}

// resultEvent returns the run's one TOOL_CALL_RESULT.
func resultEvent(tb testing.TB, evs []session.Event) session.Event {
	tb.Helper()
	var found []session.Event
	for _, ev := range evs {
		if ev.Type == session.EventToolCallResult {
			found = append(found, ev)
		}
	}
	require.Len(tb, found, 1, "one tool result")
	return found[0]
}

// contentOf returns a TOOL_CALL_RESULT's content.
func contentOf(tb testing.TB, evs []session.Event) string {
	tb.Helper()
	res := resultEvent(tb, evs)
	return res.Member("content")
}

// runMCP runs one input through agent spec and returns the session's log
// once the run succeeded.
func runMCP(t *testing.T, spec agents.Spec) (*kernel.Kernel, []session.Event) {
	t.Helper()
	k, rec, _ := newSpecKernel(t, kernel.Limits{}, spec)
	s := mustSession(t, k, spec.Name)
	run := runToEnd(t, k, rec, s.ID, "go")
	require.Equal(t, session.RunSucceeded, run.State, "a tool's failure is the model's to handle, not the run's")
	evs := verifiedLog(t, k, s.ID)
	return k, evs
}

func TestKernel_MCPTools(t *testing.T) {
	ts := mcptest.ServeHTTP(t)

	t.Run("the model is offered the server's tools and calls one", func(t *testing.T) {
		model := recordingModel(t, callsTool("t__echo", map[string]any{"message": "hello from MCP"})...)
		k, evs := runMCP(t, mcpAgent(model, agents.MCPServer{URL: ts.URL, Allow: []string{"echo", "sleep"}}))

		res := resultEvent(t, evs)
		assert.Equal(t, "hello from MCP", res.Member("content"))
		assert.False(t, isErrorResult(t, res))
		var offered []string
		for _, tool := range model.Requests()[0].Tools {
			offered = append(offered, tool.Name)
		}
		assert.Equal(t, []string{"t__echo", "t__sleep"}, offered, "only what the allow list admits")
		assert.Contains(t, string(model.Requests()[0].Tools[0].Parameters), `"message"`)

		status := k.MCPStatus(mustAgent(t, k, "mcp"))
		require.Len(t, status, 1)
		assert.Equal(t, kernel.MCPServerStatus{Name: "t", Transport: "http", State: "running"}, status[0])
	})
	t.Run("an error result reaches the model", func(t *testing.T) {
		model := recordingModel(t, callsTool("t__fail", nil)...)
		_, evs := runMCP(t, mcpAgent(model, agents.MCPServer{URL: ts.URL}))
		res := resultEvent(t, evs)
		assert.Equal(t, "error: it failed on purpose", res.Member("content"))
		assert.True(t, isErrorResult(t, res))
	})
	t.Run("a call past its timeout becomes an error result", func(t *testing.T) {
		// The sleep would outlast the test's waits: the run can only end
		// because the call gave up, and the server sees it give up.
		model := recordingModel(t, callsTool("t__sleep", map[string]any{"ms": 600_000})...)
		_, evs := runMCP(t, mcpAgent(model, agents.MCPServer{URL: ts.URL, CallTimeout: 200 * time.Millisecond}))
		res := resultEvent(t, evs)
		assert.Contains(t, res.Member("content"), "timed out after 200ms")
		assert.True(t, isErrorResult(t, res))
		select {
		case <-ts.SleepCancelled():
		case <-time.After(waitTimeout):
			t.Fatal("the server never saw the timed-out call cancelled")
		}
	})
	t.Run("a tool outside the allow list is refused", func(t *testing.T) {
		model := recordingModel(t, callsTool("t__pid", nil)...)
		_, evs := runMCP(t, mcpAgent(model, agents.MCPServer{URL: ts.URL, Allow: []string{"echo"}}))
		assert.Equal(t, `error: tool "t__pid" is not available to this agent`, contentOf(t, evs))
	})
	t.Run("a tool the server lacks is explained", func(t *testing.T) {
		model := recordingModel(t, callsTool("t__nope", nil)...)
		_, evs := runMCP(t, mcpAgent(model, agents.MCPServer{URL: ts.URL}))
		assert.Equal(t, `error: MCP server "t" has no tool "nope"`, contentOf(t, evs))
	})
}

func TestKernel_MCPServerUnavailable(t *testing.T) {
	model := recordingModel(t, callsTool("t__echo", map[string]any{"message": "hi"})...)
	k, evs := runMCP(t, mcpAgent(model, agents.MCPServer{Command: "/nonexistent/mcp-server"},
		agents.ToolRef{Name: "current_time"}))

	var notice session.Event
	for _, ev := range evs {
		if ev.Type == session.EventCustom {
			notice = ev
		}
	}
	require.Equal(t, session.EventCustom, notice.Type, "the stream says why the tools are missing")
	value := wire(t, notice)["value"].(map[string]any)
	assert.Equal(t, "kerneld.mcp.unavailable", wire(t, notice)["name"])
	assert.Equal(t, "t", value["server"])
	assert.Contains(t, value["error"], "/nonexistent/mcp-server")

	require.Len(t, model.Requests()[0].Tools, 1, "the run goes on with the other tools")
	assert.Equal(t, "current_time", model.Requests()[0].Tools[0].Name)
	assert.True(t, strings.HasPrefix(contentOf(t, evs), `error: MCP server "t" is unavailable: `))

	status := k.MCPStatus(mustAgent(t, k, "mcp"))
	assert.Equal(t, "failed", status[0].State)
	require.Error(t, status[0].Err)
	assert.Contains(t, status[0].Err.Error(), "/nonexistent/mcp-server")
}

func TestKernel_MCPToolRequiresApproval(t *testing.T) {
	ts := mcptest.ServeHTTP(t)
	model := recordingModel(t, callsTool("t__echo", map[string]any{"message": "approved"})...)
	k, rec, _ := newSpecKernel(t, kernel.Limits{}, mcpAgent(model, agents.MCPServer{URL: ts.URL},
		agents.ToolRef{Name: "t__echo", RequireApproval: true}))
	s := mustSession(t, k, "mcp")
	run := mustRun(t, k, s.ID, "go")
	var pending []kernel.Approval
	require.Eventually(t, func() bool {
		pending, _ = k.Approvals(t.Context(), s.ID, run.ID)
		return len(pending) == 1
	}, waitTimeout, time.Millisecond)
	assert.Equal(t, "t__echo", pending[0].ToolName)

	_, err := k.Decide(t.Context(), s.ID, run.ID, pending[0].ToolCallID, true, "")
	require.NoError(t, err)
	assert.Equal(t, session.RunSucceeded, waitRun(t, k, rec, s.ID, run.ID).State)
	evs := logOf(t, k, s.ID)
	assert.Equal(t, "approved", resultOf(evs, pending[0].ToolCallID))
	checkLog(t, s.ID, evs)
}

// TestKernel_MCPEverything runs the reference server over stdio: the
// model's call of everything__echo comes back in TOOL_CALL_RESULT.
func TestKernel_MCPEverything(t *testing.T) {
	command, args := mcptest.Everything(t)
	model := recordingModel(t, callsTool("everything__echo", map[string]any{"message": "hi"})...)
	spec := agents.Spec{Name: "mcp", Provider: model, MCPServers: []agents.MCPServer{
		{Name: "everything", Command: command, Args: args, Allow: []string{"echo", "get-sum"}},
	}}
	k, evs := runMCP(t, spec)
	assert.Equal(t, "Echo: hi", contentOf(t, evs))

	defs, status := k.AgentTools(t.Context(), mustAgent(t, k, "mcp"), false)
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		assert.Equal(t, "everything", d.Server)
		assert.NotEmpty(t, d.Parameters)
	}
	assert.ElementsMatch(t, []string{"everything__echo", "everything__get-sum"}, names)
	assert.Equal(t, "running", status[0].State)
}

func mustAgent(tb testing.TB, k *kernel.Kernel, name string) agents.Spec {
	tb.Helper()
	a, err := k.Agent(name)
	require.NoError(tb, err)
	return a
}

// TestKernel_ReloadAgents: reloading the agent files stops the MCP servers
// no agent is configured with any more, and keeps the others running; a
// bad reload changes nothing.
func TestKernel_ReloadAgents(t *testing.T) {
	kept, dropped := mcptest.ServeHTTP(t), mcptest.ServeHTTP(t)
	agent := func(name string, urls ...string) string {
		def := "name: " + name + "\nmodel: {provider: scripted, script: [{text: hi}]}\n"
		if len(urls) > 0 {
			def += "mcp_servers:\n"
		}
		for i, u := range urls {
			def += fmt.Sprintf("  - {name: s%d, url: %q}\n", i, u)
		}
		return def
	}
	k := kerneltest.New(t, kerneltest.Options{Agents: []string{
		agent("both", kept.URL, dropped.URL), agent("one", kept.URL),
	}})
	before := mustAgent(t, k.Kernel, "both")
	_, status := k.AgentTools(t.Context(), before, true) // starts both servers
	require.Len(t, status, 2)
	for _, s := range status {
		require.Equal(t, mcp.StateRunning, s.State, "server %s: %v", s.Name, s.Err)
	}

	writeAgent := func(i int, def string) {
		require.NoError(t, os.WriteFile(filepath.Join(k.AgentsDir, fmt.Sprintf("agent%d.yaml", i)), []byte(def), 0o600))
	}
	writeAgent(0, "name: both\nmodel: {provider: nowhere}\n")
	_, err := k.ReloadAgents()
	require.Error(t, err, "an agent with an unknown provider")
	assert.Equal(t, before, mustAgent(t, k.Kernel, "both"), "a bad reload keeps the agents")
	assert.Equal(t, mcp.StateRunning, k.MCPStatus(before)[1].State, "and stops nothing")

	writeAgent(0, agent("both")) // no servers now; "one" still names the first
	stopped, err := k.ReloadAgents()
	require.NoError(t, err)
	assert.Equal(t, []string{"s1"}, stopped, "only the server no agent names")
	status = k.MCPStatus(before)
	assert.Equal(t, mcp.StateRunning, status[0].State, "still used by agent one")
	assert.Equal(t, mcp.StateStopped, status[1].State)
	assert.Empty(t, mustAgent(t, k.Kernel, "both").MCPServers)
}
