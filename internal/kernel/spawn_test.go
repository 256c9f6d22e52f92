package kernel_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// spawner returns an agent that calls spawn_agent with args once per entry
// (in one turn), then answers.
func spawner(name string, maxChildren, maxDepth int, children string, args ...string) string {
	return spawnerWith(name, "tools: [spawn_agent, current_time, memory_get, memory_set]", maxChildren, maxDepth, children, args...)
}

// spawnerWith is spawner with the agent's tools (and any mcp_servers) given
// as YAML lines.
func spawnerWith(name, tools string, maxChildren, maxDepth int, children string, args ...string) string {
	calls := ""
	for i, a := range args {
		if i > 0 {
			calls += ", "
		}
		calls += `{name: spawn_agent, arguments: ` + a + `}`
	}
	return `
name: ` + name + `
model: {provider: scripted, script: [{text: "Delegating.", tool_calls: [` + calls + `]}, {text: "Done."}]}
` + tools + `
child_agents: [` + children + `]
limits: {max_children: ` + itoa(maxChildren) + `, max_depth: ` + itoa(maxDepth) + `}
`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// spawnResults returns the content and error flag of each TOOL_CALL_RESULT
// of spawn_agent calls in evs.
func spawnResults(evs []session.Event) (contents []string, errs []bool) {
	spawnCalls := map[string]bool{}
	for _, ev := range evs {
		switch {
		case ev.Type == session.EventToolCallStart && ev.Member("toolCallName") == kernel.SpawnAgentTool:
			spawnCalls[ev.Member("toolCallId")] = true
		case ev.Type == session.EventToolCallResult && spawnCalls[ev.Member("toolCallId")]:
			contents = append(contents, ev.Member("content"))
			errs = append(errs, len(ev.Meta) > 0)
		}
	}
	return contents, errs
}

func TestKernel_SpawnAgent(t *testing.T) {
	t.Run("returns the child's answer", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "delegator")
		run := runToEnd(t, k.Kernel, rec, s.ID, "go")
		assert.Equal(t, session.RunSucceeded, run.State)
		evs := logOf(t, k.Kernel, s.ID)
		contents, errs := spawnResults(evs)
		assert.Equal(t, []string{"hello from the parent"}, contents)
		assert.Equal(t, []bool{false}, errs)

		started := evs[indexOf(evs, 0, ofType(session.EventSubagentStarted))]
		finished := evs[indexOf(evs, 0, ofType(session.EventSubagentFinished))]
		childID, _ := kerneldMeta(t, started)["childSessionId"].(string)
		child := mustGet(t, k.Kernel, childID)
		assert.Equal(t, s.ID, child.ParentID)
		assert.Equal(t, s.ID, child.RootID)
		assert.Equal(t, 1, child.Depth)
		assert.Equal(t, "echo", child.Agent)
		assert.Equal(t, kernel.InheritNone, child.InheritMemory)
		assert.Equal(t, session.StateClosed, child.State, "a spawned child is closed once it answered")
		assert.Equal(t, "echo", started.Member("name"))
		assert.Equal(t, started.Member("subagentRunId"), finished.Member("subagentRunId"))
		assert.Equal(t, child.ActiveRunID, "", "its run is over")
		childRuns, err := k.ListRuns(t.Context(), child.ID, kernel.PageRequest{})
		require.NoError(t, err)
		assert.Equal(t, childRuns.Items[0].ID, started.Member("subagentRunId"))

		aguitest.VerifyLogs(t, [][]session.Event{evs, logOf(t, k.Kernel, child.ID)})
		assert.Empty(t, runEvents(evs, childRuns.Items[0].ID), "the child's events stay in the child's stream")
	})

	t.Run("limits fail closed", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Echo, kerneltest.Waiter, kerneltest.Slow,
			spawner("unlisted", 5, 1, "echo", `{agent: waiter, input: x}`),
			spawner("widener", 5, 1, "waiter", `{agent: waiter, input: x}`),
			spawner("crowded", 2, 1, "slow", `{agent: slow, input: a}`, `{agent: slow, input: b}`, `{agent: slow, input: c}`),
			spawner("deep", 5, 0, "deep, echo", `{agent: deep, input: again}`),
			spawner("badargs", 5, 1, "echo", `{agent: echo}`, `{agent: echo, input: x, inherit: {memory: all}}`, `{agent: echo, input: x, colour: red}`),
		}})
		for _, tt := range []struct {
			agent   string
			wantErr []bool
			want    string
		}{
			{"unlisted", []bool{true}, `agent "waiter" is not one this agent may start`},
			{"widener", []bool{true}, `may use tool "wait", which this agent may not`},
			{"crowded", []bool{false, false, true}, "allows 2 open child sessions"},
			{"deep", []bool{true}, "allows sessions 0 deep"},
			{"badargs", []bool{true, true, true}, "arguments"},
		} {
			t.Run(tt.agent, func(t *testing.T) {
				s := mustSession(t, k.Kernel, tt.agent)
				run := runToEnd(t, k.Kernel, rec, s.ID, "go")
				assert.Equal(t, session.RunSucceeded, run.State, "a refused spawn is an error result, not a failed run")
				contents, errs := spawnResults(logOf(t, k.Kernel, s.ID))
				assert.ElementsMatch(t, tt.wantErr, errs)
				joined := ""
				for _, c := range contents {
					joined += c + "\n"
				}
				assert.Contains(t, joined, tt.want)
			})
		}
	})

	t.Run("a child keeps every approval its parent needs", func(t *testing.T) {
		gatedTools := "tools: [spawn_agent, current_time, memory_get, {name: memory_set, require_approval: true}]"
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Echo, careful,
			spawnerWith("launderer", gatedTools, 5, 1, "echo", `{agent: echo, input: x}`),
			spawnerWith("keeper", gatedTools, 5, 1, "careful", `{agent: careful, input: x}`),
		}})
		content, isErr := spawnOnce(t, k, rec, "launderer")
		assert.True(t, isErr, "echo may call memory_set without approval: %s", content)
		assert.Contains(t, content, `agent "echo" may use tool "memory_set" without approval`)
		content, isErr = spawnOnce(t, k, rec, "keeper")
		assert.False(t, isErr, content)
	})

	t.Run("a child's MCP servers are its parent's, within its allow list", func(t *testing.T) {
		ts := mcptest.ServeHTTP(t)
		server := func(fields string) string {
			return "mcp_servers: [{name: t, " + fields + "}]"
		}
		parentTools := "tools: [spawn_agent]\n" + server("url: "+ts.URL+", allow: [echo, sleep]")
		children := []struct {
			name, mcp string
			want      string // "" if the child may be started
		}{
			{"narrower", server("url: " + ts.URL + ", allow: [echo]"), ""},
			{"same", server("url: " + ts.URL + ", allow: [sleep, echo]"), ""},
			{"elsewhere", server("url: " + ts.URL + "/other, allow: [echo]"), `connects to MCP server "t" differently`},
			{"headers", server("url: " + ts.URL + ", headers: {X-Token: mine}, allow: [echo]"), `connects to MCP server "t" differently`},
			{"stdio", server("command: kerneld-no-such-server, allow: [echo]"), `connects to MCP server "t" differently`},
			{"wider", server("url: " + ts.URL + ", allow: [echo, fail]"), `may use tool "fail" of MCP server "t"`},
			{"unlimited", server("url: " + ts.URL), `may use every tool of MCP server "t"`},
			{"stranger", "mcp_servers: [{name: u, url: " + ts.URL + ", allow: [echo]}]", `uses MCP server "u", which this agent does not`},
		}
		// A stdio server is the same one only with the same args and env.
		// This one cannot start: its parent's and child's runs go on
		// without it.
		stdio := "command: kerneld-no-such-server, args: [--root, /srv], env: {MODE: ro}, allow: [echo]"
		stdioChildren := []struct {
			name, mcp string
			want      string
		}{
			{"stdio-same", server(stdio), ""},
			{"stdio-args", server("command: kerneld-no-such-server, args: [--root, /], env: {MODE: ro}, allow: [echo]"),
				`connects to MCP server "t" differently`},
			{"stdio-env", server("command: kerneld-no-such-server, args: [--root, /srv], env: {MODE: rw}, allow: [echo]"),
				`connects to MCP server "t" differently`},
		}
		defs := []string{}
		for _, c := range children {
			defs = append(defs,
				"name: "+c.name+"\nmodel: {provider: scripted, script: [{text: ok}]}\n"+c.mcp+"\n",
				spawnerWith("boss-"+c.name, parentTools, 5, 1, c.name, `{agent: `+c.name+`, input: x}`))
		}
		for _, c := range stdioChildren {
			defs = append(defs,
				"name: "+c.name+"\nmodel: {provider: scripted, script: [{text: ok}]}\n"+c.mcp+"\n",
				spawnerWith("boss-"+c.name, "tools: [spawn_agent]\n"+server(stdio), 5, 1, c.name, `{agent: `+c.name+`, input: x}`))
		}
		children = append(children, stdioChildren...)
		// An MCP tool the parent may call only with approval: a child with
		// the same server must need it too, whether or not it lists the tool.
		gated := "tools: [spawn_agent, {name: t__echo, require_approval: true}]\n" + server("url: "+ts.URL+", allow: [echo]")
		defs = append(defs,
			spawnerWith("gate-narrower", gated, 5, 1, "narrower", `{agent: narrower, input: x}`),
			"name: mcpcareful\nmodel: {provider: scripted, script: [{text: ok}]}\n"+
				"tools: [{name: t__echo, require_approval: true}]\n"+server("url: "+ts.URL+", allow: [echo]")+"\n",
			spawnerWith("gate-careful", gated, 5, 1, "mcpcareful", `{agent: mcpcareful, input: x}`))
		k, rec := newKernel(t, kerneltest.Options{Agents: defs})

		for _, c := range children {
			t.Run(c.name, func(t *testing.T) {
				content, isErr := spawnOnce(t, k, rec, "boss-"+c.name)
				if c.want == "" {
					assert.False(t, isErr, content)
					return
				}
				assert.True(t, isErr, "the child was started: %s", content)
				assert.Contains(t, content, c.want)
			})
		}
		t.Run("approval", func(t *testing.T) {
			content, isErr := spawnOnce(t, k, rec, "gate-narrower")
			assert.True(t, isErr, "the child was started: %s", content)
			assert.Contains(t, content, `agent "narrower" may use tool "t__echo" without approval`)
			content, isErr = spawnOnce(t, k, rec, "gate-careful")
			assert.False(t, isErr, content)
		})
	})

	t.Run("every ancestor's max_depth bounds a child", func(t *testing.T) {
		// shallow allows one level; nester, its child, allows three and
		// tries to add a second level.
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Echo,
			spawner("shallow", 5, 1, "nester", `{agent: nester, input: x}`),
			spawner("nester", 5, 3, "echo", `{agent: echo, input: x}`),
		}})
		s := mustSession(t, k.Kernel, "shallow")
		runToEnd(t, k.Kernel, rec, s.ID, "go")
		contents, errs := spawnResults(logOf(t, k.Kernel, s.ID))
		assert.Equal(t, []bool{false}, errs, "shallow may start nester: %v", contents)
		nester := childOf(t, logOf(t, k.Kernel, s.ID))
		contents, errs = spawnResults(logOf(t, k.Kernel, nester))
		assert.Equal(t, []bool{true}, errs, "nester may not nest deeper than shallow allows: %v", contents)
		require.Len(t, contents, 1)
		assert.Contains(t, contents[0], `agent "shallow" allows sessions 1 deep; the parent is at depth 1`)

		// nester started as a root may use its own limit.
		content, isErr := spawnOnce(t, k, rec, "nester")
		assert.False(t, isErr, content)
	})

	t.Run("a failed child is an error result and the parent goes on", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Failing, spawner("boss", 5, 1, "failing", `{agent: failing, input: x}`),
		}})
		s := mustSession(t, k.Kernel, "boss")
		run := runToEnd(t, k.Kernel, rec, s.ID, "go")
		assert.Equal(t, session.RunSucceeded, run.State, "a failed child is the model's to handle")
		evs := logOf(t, k.Kernel, s.ID)
		contents, errs := spawnResults(evs)
		assert.Equal(t, []bool{true}, errs)
		require.Len(t, contents, 1)
		assert.Contains(t, contents[0], "model overloaded")

		i := indexOf(evs, 0, ofType(session.EventSubagentError))
		require.GreaterOrEqual(t, i, 0, "no SUBAGENT_ERROR")
		assert.Equal(t, "failed", evs[i].Member("code"))
		assert.Contains(t, evs[i].Member("message"), "model overloaded")
		assert.Negative(t, indexOf(evs, 0, ofType(session.EventSubagentFinished)))
		started := evs[indexOf(evs, 0, ofType(session.EventSubagentStarted))]
		assert.Equal(t, started.Member("subagentRunId"), evs[i].Member("subagentRunId"))
		assert.Greater(t, indexOf(evs, i, ofType(session.EventTextMessageContent)), i,
			"the parent's model answers after the child failed")

		childID := childOf(t, evs)
		childRuns, err := k.ListRuns(t.Context(), childID, kernel.PageRequest{})
		require.NoError(t, err)
		assert.Equal(t, session.RunFailed, childRuns.Items[0].State)
		assert.Equal(t, session.StateClosed, mustGet(t, k.Kernel, childID).State)
		aguitest.VerifyLogs(t, [][]session.Event{evs, logOf(t, k.Kernel, childID)})
	})

	t.Run("cancelling the parent cancels the child", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Slow, spawner("boss", 5, 1, "slow", `{agent: slow, input: long}`),
		}})
		s := mustSession(t, k.Kernel, "boss")
		run := mustRun(t, k.Kernel, s.ID, "go")
		rec.WaitEvents(t, s.ID, run.ID, session.EventSubagentStarted, 1)
		childID := childOf(t, rec.Events(s.ID))
		_, err := k.CancelRun(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", outcomeOf(rec.WaitRunEnd(t, s.ID, run.ID)))
		childRuns, err := k.ListRuns(t.Context(), childID, kernel.PageRequest{})
		require.NoError(t, err)
		assert.Equal(t, session.RunCancelled, childRuns.Items[0].State)
		evs := logOf(t, k.Kernel, s.ID)
		assert.GreaterOrEqual(t, indexOf(evs, 0, ofType(session.EventSubagentError)), 0)
		aguitest.VerifyLogs(t, [][]session.Event{evs, logOf(t, k.Kernel, childID)})
	})

	t.Run("interrupting the parent cancels the child", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Slow, kerneltest.Echo, spawner("boss", 5, 1, "slow", `{agent: slow, input: long}`),
		}})
		s := mustSession(t, k.Kernel, "boss")
		run := mustRun(t, k.Kernel, s.ID, "go")
		rec.WaitEvents(t, s.ID, run.ID, session.EventSubagentStarted, 1)
		childID := childOf(t, rec.Events(s.ID))
		next := post(t, k.Kernel, s.ID, "never mind", kernel.BusyInterrupt)
		waitRun(t, k.Kernel, rec, s.ID, next.ID)
		childRuns, err := k.ListRuns(t.Context(), childID, kernel.PageRequest{})
		require.NoError(t, err)
		assert.Equal(t, session.RunCancelled, childRuns.Items[0].State)
		aguitest.Verify(t, logOf(t, k.Kernel, s.ID))
	})

	t.Run("deleting the parent with cascade deletes the child", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "delegator")
		runToEnd(t, k.Kernel, rec, s.ID, "go")
		childID := childOf(t, logOf(t, k.Kernel, s.ID))
		require.Error(t, k.DeleteSession(t.Context(), s.ID, false))
		require.NoError(t, k.DeleteSession(t.Context(), s.ID, true))
		_, err := k.GetSession(t.Context(), childID)
		require.Error(t, err)
	})

	t.Run("a child may copy its parent's memory", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{
			kerneltest.Echo, spawner("sharer", 5, 1, "echo", `{agent: echo, input: x, inherit: {memory: copy}}`),
		}})
		s := mustSession(t, k.Kernel, "sharer")
		_, err := k.PutMemory(t.Context(), s.ID, "user", json.RawMessage(`{"name":"Ada"}`))
		require.NoError(t, err)
		runToEnd(t, k.Kernel, rec, s.ID, "go")
		child := mustGet(t, k.Kernel, childOf(t, logOf(t, k.Kernel, s.ID)))
		assert.Equal(t, kernel.InheritCopy, child.InheritMemory)
		e, err := k.GetMemory(t.Context(), child.ID, "user")
		require.NoError(t, err)
		assert.JSONEq(t, `{"name":"Ada"}`, string(e.Value))
	})
}

// careful is an agent that lists memory_set, with approval, and answers.
const careful = `
name: careful
model: {provider: scripted, script: [{text: "ok"}]}
tools: [current_time, memory_get, {name: memory_set, require_approval: true}]
`

// spawnOnce runs a new session of agent, whose one spawn_agent call must
// get one result, and returns that result's content and error flag.
func spawnOnce(t *testing.T, k *kerneltest.Kernel, rec *recorder, agent string) (string, bool) {
	t.Helper()
	s := mustSession(t, k.Kernel, agent)
	run := runToEnd(t, k.Kernel, rec, s.ID, "go")
	require.Equal(t, session.RunSucceeded, run.State, "a refused spawn is an error result, not a failed run")
	contents, errs := spawnResults(logOf(t, k.Kernel, s.ID))
	require.Len(t, contents, 1)
	return contents[0], errs[0]
}

// childOf returns the child session of the first SUBAGENT_STARTED in evs.
func childOf(t *testing.T, evs []session.Event) string {
	t.Helper()
	i := indexOf(evs, 0, ofType(session.EventSubagentStarted))
	require.GreaterOrEqual(t, i, 0, "no SUBAGENT_STARTED")
	id, _ := kerneldMeta(t, evs[i])["childSessionId"].(string)
	return id
}
