package kernel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// autoApprovals returns the kerneld.approval.auto events of evs, by tool
// call id.
func autoApprovals(evs []session.Event) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, ev := range evs {
		if ev.Type == session.EventCustom && ev.Member("name") == "kerneld.approval.auto" {
			v, _ := ev.Fields()["value"].(map[string]any)
			out[v["toolCallId"].(string)] = v
		}
	}
	return out
}

// requestedCalls lists the tool calls of evs that asked a person, in order.
func requestedCalls(evs []session.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == session.EventCustom && ev.Member("name") == "kerneld.approval.requested" {
			v, _ := ev.Fields()["value"].(map[string]any)
			out = append(out, v["toolCallId"].(string))
		}
	}
	return out
}

// waitPending waits until run has n approvals, the last pending, and
// returns them.
func waitPending(t *testing.T, k *kernel.Kernel, sessionID, runID string, n int) []kernel.Approval {
	t.Helper()
	var all []kernel.Approval
	require.Eventually(t, func() bool {
		all, _ = k.Approvals(t.Context(), sessionID, runID)
		return len(all) == n && all[n-1].State == kernel.ApprovalPending
	}, waitTimeout, time.Millisecond, "run %s never asked for approval %d", runID, n)
	return all
}

// savesTwice calls memory_set with a, then a again, then b, then answers.
func savesTwice(t *testing.T) agents.Spec {
	set := func(key string) step {
		return step{Text: "Saving.", ToolCalls: []scriptedCall{{Name: "memory_set", Arguments: map[string]any{"key": key, "value": 1}}}}
	}
	model := recordingModel(t, set("a"), set("a"), set("b"), step{Text: "Done."})
	return agents.Spec{Name: "saver", Provider: model, Tools: []agents.ToolRef{{Name: "memory_set", RequireApproval: true}}}
}

// TestPermissions_Always: "always" approves the call and the tool's later
// calls without asking, each logged with the reason; with same_arguments
// only the identical ones. The standing approval is on the session.
func TestPermissions_Always(t *testing.T) {
	t.Run("any arguments", func(t *testing.T) {
		k, rec, _ := newSpecKernel(t, kernel.Limits{}, savesTwice(t))
		s := mustSession(t, k, "saver")
		run := mustRun(t, k, s.ID, "save")
		first := waitPending(t, k, s.ID, run.ID, 1)[0]
		a, err := k.DecideWith(t.Context(), s.ID, run.ID, first.ToolCallID, kernel.Verdict{Decision: kernel.DecisionAlways})
		require.NoError(t, err)
		assert.Equal(t, kernel.ApprovalApproved, a.State)
		assert.Equal(t, session.RunSucceeded, waitRun(t, k, rec, s.ID, run.ID).State)

		evs := verifiedLog(t, k, s.ID)
		assert.Equal(t, []string{first.ToolCallID}, requestedCalls(evs), "only the first call asked")
		auto := autoApprovals(evs)
		require.Len(t, auto, 2, "the identical call and the other one ran without asking")
		for _, v := range auto {
			assert.Equal(t, "memory_set", v["toolName"])
			assert.Equal(t, "approved always in this session (decision on "+first.ToolCallID+")", v["reason"])
		}
		got := mustGet(t, k, s.ID)
		require.Len(t, got.Grants, 1)
		assert.Equal(t, session.Grant{Tool: "memory_set", ToolCallID: first.ToolCallID}, got.Grants[0])
	})
	t.Run("same arguments", func(t *testing.T) {
		k, rec, _ := newSpecKernel(t, kernel.Limits{}, savesTwice(t))
		s := mustSession(t, k, "saver")
		run := mustRun(t, k, s.ID, "save")
		first := waitPending(t, k, s.ID, run.ID, 1)[0]
		_, err := k.DecideWith(t.Context(), s.ID, run.ID, first.ToolCallID,
			kernel.Verdict{Decision: kernel.DecisionAlways, SameArguments: true})
		require.NoError(t, err)
		second := waitPending(t, k, s.ID, run.ID, 2)[1]
		assert.JSONEq(t, `{"key":"b","value":1}`, string(second.Arguments), "other arguments ask again")
		_, err = k.Decide(t.Context(), s.ID, run.ID, second.ToolCallID, false, "no")
		require.NoError(t, err)
		assert.Equal(t, session.RunSucceeded, waitRun(t, k, rec, s.ID, run.ID).State)

		evs := verifiedLog(t, k, s.ID)
		auto := autoApprovals(evs)
		require.Len(t, auto, 1, "the identical call ran without asking")
		for _, v := range auto {
			assert.Equal(t, map[string]any{"key": "a", "value": float64(1)}, v["arguments"])
			assert.Contains(t, v["reason"], "approved always for these arguments")
		}
		assert.Equal(t, `{"key":"a","value":1}`, mustGet(t, k, s.ID).Grants[0].Arguments)
	})
	t.Run("refused", func(t *testing.T) {
		k, _, _ := newSpecKernel(t, kernel.Limits{}, savesTwice(t))
		s := mustSession(t, k, "saver")
		run := mustRun(t, k, s.ID, "save")
		first := waitPending(t, k, s.ID, run.ID, 1)[0]
		_, err := k.DecideWith(t.Context(), s.ID, run.ID, first.ToolCallID, kernel.Verdict{Decision: "sometimes"})
		require.ErrorIs(t, err, errdefs.ErrInvalid)
		_, err = k.DecideWith(t.Context(), s.ID, run.ID, first.ToolCallID, kernel.Verdict{Decision: kernel.DecisionApprove, SameArguments: true})
		require.ErrorIs(t, err, errdefs.ErrInvalid)
		assert.Empty(t, mustGet(t, k, s.ID).Grants, "a refused decision grants nothing")
	})
}

// TestPermissions_ReadOnlyAuto: in read_only_auto, the reference MCP
// server's echo (annotated readOnlyHint) runs without asking, logged with
// the reason, while a tool that writes still asks; in ask, echo asks.
func TestPermissions_ReadOnlyAuto(t *testing.T) {
	command, args := mcptest.Everything(t)
	calls := step{Text: "Calling.", ToolCalls: []scriptedCall{
		{Name: "everything__echo", Arguments: map[string]any{"message": "hi"}},
		{Name: "everything__toggle-simulated-logging", Arguments: map[string]any{}},
	}}
	model := recordingModel(t, calls, step{Text: "Done."}, calls, step{Text: "Done."})
	spec := agents.Spec{Name: "mcp", Provider: model, MCPServers: []agents.MCPServer{
		{Name: "everything", Command: command, Args: args, Allow: []string{"echo", "toggle-simulated-logging"}},
	}, Tools: []agents.ToolRef{
		{Name: "everything__echo", RequireApproval: true}, {Name: "everything__toggle-simulated-logging", RequireApproval: true},
	}}
	k, rec, _ := newSpecKernel(t, kernel.Limits{}, spec)
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "mcp", PermissionMode: agents.PermissionReadOnlyAuto})
	require.NoError(t, err)
	run := mustRun(t, k, s.ID, "go")
	pending := waitPending(t, k, s.ID, run.ID, 1)
	assert.Equal(t, "everything__toggle-simulated-logging", pending[0].ToolName, "a tool that writes still asks")
	_, err = k.Decide(t.Context(), s.ID, run.ID, pending[0].ToolCallID, false, "")
	require.NoError(t, err)
	assert.Equal(t, session.RunSucceeded, waitRun(t, k, rec, s.ID, run.ID).State)
	evs := verifiedLog(t, k, s.ID)
	auto := autoApprovals(evs)
	require.Len(t, auto, 1)
	for id, v := range auto {
		assert.Equal(t, "everything__echo", v["toolName"])
		assert.Equal(t, "read_only_auto", v["permissionMode"])
		assert.Equal(t, "permission_mode read_only_auto: everything__echo only reads (MCP readOnlyHint)", v["reason"])
		assert.Equal(t, "Echo: hi", resultOf(evs, id))
	}

	ask := agents.PermissionAsk
	_, err = k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{PermissionMode: &ask})
	require.NoError(t, err)
	run = mustRun(t, k, s.ID, "again")
	assert.Len(t, waitPending(t, k, s.ID, run.ID, 2), 2, "in ask, echo asks too")
}

// TestPermissions_ModeBounds: a session may choose only the modes its
// agent allows; ask always.
func TestPermissions_ModeBounds(t *testing.T) {
	model := recordingModel(t, step{Text: "Hi."})
	strict := agents.Spec{Name: "strict", Provider: model, PermissionModes: []string{agents.PermissionAsk}}
	open := agents.Spec{Name: "open", Provider: model, PermissionModes: []string{agents.PermissionAuto}}
	k, _, _ := newSpecKernel(t, kernel.Limits{}, strict, open)

	_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "strict", PermissionMode: agents.PermissionAuto})
	requireCode(t, err, errdefs.ErrUnprocessable, "permission_mode_not_allowed")
	_, err = k.CreateSession(t.Context(), kernel.CreateSession{Agent: "strict", PermissionMode: "yolo"})
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "open", PermissionMode: agents.PermissionAsk})
	require.NoError(t, err, "ask is always allowed")
	auto, readOnly := agents.PermissionAuto, agents.PermissionReadOnlyAuto
	_, err = k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{PermissionMode: &readOnly})
	requireCode(t, err, errdefs.ErrUnprocessable, "permission_mode_not_allowed")
	got, err := k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{PermissionMode: &auto})
	require.NoError(t, err)
	assert.Equal(t, agents.PermissionAuto, got.PermissionMode)
}
