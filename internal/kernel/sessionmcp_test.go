package kernel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools/mcp"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// sessionMCPConfig allows one stdio server, "allowed", and gives tenant
// "" the secret DOCS_TOKEN.
func sessionMCPConfig() kernel.SessionMCP {
	return kernel.SessionMCP{
		Stdio: map[string]mcp.ServerConfig{"allowed": {Command: "true"}},
		Secret: func(tenant, name string) (string, bool) {
			if tenant == "" && name == "DOCS_TOKEN" {
				return "s3cret", true
			}
			return "", false
		},
	}
}

// TestSessionMCP_AttachedToOneSession: a real MCP server over streamable
// HTTP attached to one session serves that session's runs, with the
// tenant's secret in its headers, and no other session's; its status
// shows it running until the session closes.
func TestSessionMCP_AttachedToOneSession(t *testing.T) {
	ts := mcptest.ServeHTTP(t)
	model := recordingModel(t,
		step{Text: "Calling.", ToolCalls: []scriptedCall{{Name: "docs__echo", Arguments: map[string]any{"message": "from the session's server"}}}},
		step{Text: "Done."},
		step{Text: "Calling.", ToolCalls: []scriptedCall{{Name: "docs__echo", Arguments: map[string]any{"message": "no"}}}},
		step{Text: "Done."},
	)
	k, rec, _ := newConfiguredKernel(t, kernel.Config{SessionMCP: sessionMCPConfig()},
		agents.Spec{Name: "helper", Provider: model, Tools: toolRefs("current_time")})
	with, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "helper", MCPServers: []session.MCPServer{
		{Name: "docs", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${DOCS_TOKEN}"}}}})
	require.NoError(t, err)
	without := mustSession(t, k, "helper")
	assert.Equal(t, "stopped", k.SessionMCPStatus(with)[0].State, "started lazily, on first use")

	runToEnd(t, k, rec, with.ID, "go")
	evs := verifiedLog(t, k, with.ID)
	assert.Equal(t, "from the session's server", contentOf(t, evs))
	assert.False(t, isErrorResult(t, resultEvent(t, evs)))
	assert.Equal(t, "running", k.SessionMCPStatus(with)[0].State)
	var auth []string
	for _, h := range ts.RequestHeaders() {
		auth = append(auth, h.Get("Authorization"))
	}
	assert.Contains(t, auth, "Bearer s3cret", "the secret, put in by reference")

	runToEnd(t, k, rec, without.ID, "go")
	evs = verifiedLog(t, k, without.ID)
	assert.True(t, isErrorResult(t, resultEvent(t, evs)), "another session has no such tool")
	assert.Contains(t, contentOf(t, evs), "not available to this agent")

	reqs := model.Requests()
	require.Len(t, reqs, 4)
	assert.Contains(t, toolNames(reqs[0]), "docs__echo")
	assert.NotContains(t, toolNames(reqs[2]), "docs__echo")

	_, err = k.CloseSession(t.Context(), with.ID)
	require.NoError(t, err)
	closed, err := k.GetSession(t.Context(), with.ID)
	require.NoError(t, err)
	assert.Equal(t, "stopped", k.SessionMCPStatus(closed)[0].State, "stopped with its session")
}

// TestSessionMCP_Refused: a stdio server outside the operator's
// allow-list, a secret the tenant lacks, a name of the agent's own
// servers and a change while a run is under way are refused.
func TestSessionMCP_Refused(t *testing.T) {
	model := recordingModel(t, step{Text: "ok"})
	k, _, wait := newConfiguredKernel(t, kernel.Config{SessionMCP: sessionMCPConfig()},
		agents.Spec{Name: "helper", Provider: model, MCPServers: []agents.MCPServer{{Name: "own", URL: "http://127.0.0.1:1/mcp"}}},
		agents.Spec{Name: "waiter", Provider: recordingModel(t, step{ToolCalls: []scriptedCall{{Name: "wait"}}}, step{Text: "ok"}), Tools: toolRefs("wait")})
	create := func(srv session.MCPServer) error {
		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "helper", MCPServers: []session.MCPServer{srv}})
		return err
	}
	var invalid *errdefs.ValidationError
	err := create(session.MCPServer{Name: "shell", Stdio: "bash"})
	require.ErrorAs(t, err, &invalid)
	assert.Contains(t, invalid.Problems["mcp_servers[0].stdio"], `"bash" is not a stdio server this kerneld allows (allowed: allowed)`)

	err = create(session.MCPServer{Name: "docs", URL: "https://example.com/mcp", Headers: map[string]string{"X-Key": "${OTHER}"}})
	require.ErrorAs(t, err, &invalid)
	assert.Contains(t, invalid.Problems["mcp_servers[0].headers.X-Key"], `names secret "OTHER"`)

	err = create(session.MCPServer{Name: "docs", URL: "file:///etc/passwd"})
	require.ErrorIs(t, err, errdefs.ErrInvalid)

	err = create(session.MCPServer{Name: "own", URL: "https://example.com/mcp"})
	assert.Equal(t, errdefs.CodeMCPServerNameTaken, errdefs.CodeOf(err))

	require.NoError(t, create(session.MCPServer{Name: "ok", Stdio: "allowed"}), "an allowed stdio server")

	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "waiter"})
	require.NoError(t, err)
	mustRun(t, k, s.ID, "go")
	<-wait.Started()
	servers := []session.MCPServer{{Name: "docs", URL: "https://example.com/mcp"}}
	_, err = k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{MCPServers: &servers})
	assert.Equal(t, errdefs.CodeSessionBusy, errdefs.CodeOf(err), "only while idle")
	wait.Release()
	require.Eventually(t, func() bool {
		_, err = k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{MCPServers: &servers})
		return err == nil
	}, waitTimeout, 10*time.Millisecond)
	got, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, servers, got.MCPServers)
}

// TestSessionMCP_IdleStops: a session's servers stop once it has run
// nothing for the idle timeout, and the next run starts them again.
func TestSessionMCP_IdleStops(t *testing.T) {
	ts := mcptest.ServeHTTP(t)
	call := step{Text: "Calling.", ToolCalls: []scriptedCall{{Name: "docs__echo", Arguments: map[string]any{"message": "hi"}}}}
	model := recordingModel(t, call, step{Text: "Done."}, call, step{Text: "Done."})
	cfg := sessionMCPConfig()
	cfg.IdleTimeout = 200 * time.Millisecond
	k, rec, _ := newConfiguredKernel(t, kernel.Config{SessionMCP: cfg}, agents.Spec{Name: "helper", Provider: model})
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "helper", MCPServers: []session.MCPServer{{Name: "docs", URL: ts.URL}}})
	require.NoError(t, err)
	runToEnd(t, k, rec, s.ID, "go")
	require.Eventually(t, func() bool { return k.SessionMCPStatus(s)[0].State == "stopped" }, waitTimeout, 20*time.Millisecond)
	run := runToEnd(t, k, rec, s.ID, "again")
	assert.Equal(t, session.RunSucceeded, run.State)
	evs := logOf(t, k, s.ID)
	var results int
	for _, ev := range evs {
		if ev.Type == session.EventToolCallResult {
			results++
			assert.False(t, isErrorResult(t, ev), "%s", ev.Data)
		}
	}
	assert.Equal(t, 2, results)
}

// toolNames lists the tools a model request offers.
func toolNames(req llm.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

// TestSessionMCP_TakeOver: the replica that takes a session over starts
// its MCP servers again, and the continued run calls their tools there.
func TestSessionMCP_TakeOver(t *testing.T) {
	ts := mcptest.ServeHTTP(t)
	const ttl = 300 * time.Millisecond
	agent := `
name: slowcaller
model:
  provider: scripted
  token_delay: 20ms
  script:
    - {text: "a b c d e f g h i j k l m n o p q r s t u v w x y z", tool_calls: [{name: docs__echo, arguments: {message: "after the take-over"}}]}
    - {text: "Done."}
`
	store, b := memory.New(), &bus{}
	var rs []replica
	for i := range 2 {
		st := &renewalStore{Store: store}
		k, rec := newKernel(t, kerneltest.Options{Store: st, Agents: []string{agent}, Replication: kernel.Replication{
			Replica: string(rune('a' + i)), Signals: b, LeaseTTL: ttl, CheckInterval: 50 * time.Millisecond}})
		rs = append(rs, replica{Kernel: k, rec: rec, store: st})
		b.mu.Lock()
		b.kernels = append(b.kernels, k.Kernel)
		b.mu.Unlock()
	}
	a, other := rs[0], rs[1]
	s, err := a.CreateSession(t.Context(), kernel.CreateSession{Agent: "slowcaller",
		MCPServers: []session.MCPServer{{Name: "docs", URL: ts.URL}}})
	require.NoError(t, err)
	run := mustRun(t, a.Kernel.Kernel, s.ID, "go")
	a.rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 3)
	assert.Equal(t, "running", a.Kernel.SessionMCPStatus(s)[0].State, "started by the first owner")
	a.store.failRenewals.Store(true)

	got := awaitEnd(t, other.Kernel.Kernel, s.ID, run.ID)
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Equal(t, 1, got.Resumes)
	assert.Equal(t, "running", other.Kernel.SessionMCPStatus(s)[0].State, "the new owner reconnected")
	evs := logOf(t, other.Kernel.Kernel, s.ID)
	assert.Equal(t, "after the take-over", contentOf(t, evs))
	assert.False(t, isErrorResult(t, resultEvent(t, evs)))
	a.store.failRenewals.Store(false)
}

// TestSessionMCP_BoundedPerTenant: a tenant's sessions run at most
// MaxPerTenant servers of their own at once; a run past that goes on
// without its session's, saying why.
func TestSessionMCP_BoundedPerTenant(t *testing.T) {
	ts := mcptest.ServeHTTP(t)
	call := step{Text: "Calling.", ToolCalls: []scriptedCall{{Name: "docs__echo", Arguments: map[string]any{"message": "hi"}}}}
	model := recordingModel(t, call, step{Text: "Done."}, call, step{Text: "Done."})
	cfg := sessionMCPConfig()
	cfg.MaxPerTenant = 1
	k, rec, _ := newConfiguredKernel(t, kernel.Config{SessionMCP: cfg}, agents.Spec{Name: "helper", Provider: model})
	servers := []session.MCPServer{{Name: "docs", URL: ts.URL}}
	first, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "helper", MCPServers: servers})
	require.NoError(t, err)
	second, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "helper", MCPServers: servers})
	require.NoError(t, err)

	runToEnd(t, k, rec, first.ID, "go")
	assert.False(t, isErrorResult(t, resultEvent(t, logOf(t, k, first.ID))))
	run := runToEnd(t, k, rec, second.ID, "go")
	assert.Equal(t, session.RunSucceeded, run.State, "the run goes on without them")
	evs := logOf(t, k, second.ID)
	assert.True(t, isErrorResult(t, resultEvent(t, evs)))
	assert.Contains(t, contentOf(t, evs), "at most 1 at once")
	require.Len(t, customEvents(evs, "kerneld.mcp.unavailable"), 1)
}
