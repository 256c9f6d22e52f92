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
)

// spawner returns an agent that calls spawn_agent with args once per entry
// (in one turn), then answers.
func spawner(name string, maxChildren, maxDepth int, children string, args ...string) string {
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
tools: [spawn_agent, current_time, memory_get, memory_set]
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

// childOf returns the child session of the first SUBAGENT_STARTED in evs.
func childOf(t *testing.T, evs []session.Event) string {
	t.Helper()
	i := indexOf(evs, 0, ofType(session.EventSubagentStarted))
	require.GreaterOrEqual(t, i, 0, "no SUBAGENT_STARTED")
	id, _ := kerneldMeta(t, evs[i])["childSessionId"].(string)
	return id
}
