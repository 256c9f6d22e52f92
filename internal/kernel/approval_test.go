package kernel_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// awaitApprovals starts a gated run and waits until it asks for both
// approvals; it returns the run and the two pending approvals.
func awaitApprovals(t *testing.T, k *kerneltest.Kernel, rec *recorder, sessionID string) (session.Run, []kernel.Approval) {
	t.Helper()
	run := mustRun(t, k.Kernel, sessionID, "save a and b")
	var pending []kernel.Approval
	require.Eventually(t, func() bool {
		all, err := k.Approvals(t.Context(), sessionID, run.ID)
		r, _ := k.GetRun(t.Context(), sessionID, run.ID)
		pending = all
		// The run's record changes just before the session's.
		return err == nil && len(all) == 2 && r.State == session.RunWaitingInput &&
			mustGet(t, k.Kernel, sessionID).State == session.StateWaitingInput
	}, waitTimeout, time.Millisecond)
	return run, pending
}

// resultOf returns the TOOL_CALL_RESULT content for call id in evs.
func resultOf(evs []session.Event, id string) string {
	for _, ev := range evs {
		if ev.Type == session.EventToolCallResult && ev.Member("toolCallId") == id {
			return ev.Member("content")
		}
	}
	return ""
}

func TestKernel_Approvals(t *testing.T) {
	t.Run("approve one, deny the other", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "gated")
		run, pending := awaitApprovals(t, k, rec, s.ID)
		assert.Equal(t, "memory_set", pending[0].ToolName)
		assert.JSONEq(t, `{"key":"a","value":1}`, string(pending[0].Arguments))
		assert.Equal(t, kernel.ApprovalPending, pending[0].State)

		a, err := k.Decide(t.Context(), s.ID, run.ID, pending[0].ToolCallID, true, "")
		require.NoError(t, err)
		assert.Equal(t, kernel.ApprovalApproved, a.State)
		_, err = k.Decide(t.Context(), s.ID, run.ID, pending[0].ToolCallID, false, "")
		requireCode(t, err, errdefs.ErrConflict, "approval_decided")
		_, err = k.Decide(t.Context(), s.ID, run.ID, pending[1].ToolCallID, false, "not b")
		require.NoError(t, err)

		assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
		_, err = k.GetMemory(t.Context(), s.ID, "a")
		require.NoError(t, err, "the approved call ran")
		_, err = k.GetMemory(t.Context(), s.ID, "b")
		require.ErrorIs(t, err, errdefs.ErrNotFound, "the denied call did not")
		evs := logOf(t, k.Kernel, s.ID)
		assert.Equal(t, "denied: not b", resultOf(evs, pending[1].ToolCallID))
		all, err := k.Approvals(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{kernel.ApprovalApproved, kernel.ApprovalDenied}, []string{all[0].State, all[1].State})
		checkLog(t, s.ID, evs)
		aguitest.Verify(t, evs)
		checkHistory(t, historyOf(t, k.Kernel, s.ID))

		_, err = k.Decide(t.Context(), s.ID, run.ID, pending[1].ToolCallID, true, "")
		requireCode(t, err, errdefs.ErrConflict, "approval_decided")
		_, err = k.Decide(t.Context(), s.ID, run.ID, "call_nope", true, "")
		requireCode(t, err, errdefs.ErrNotFound, "approval_not_found")
	})

	t.Run("undecided calls are denied when the approval expires", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{strings.Replace(kerneltest.Gated, "approval_timeout: 1h", "approval_timeout: 50ms", 1)}})
		s := mustSession(t, k.Kernel, "gated")
		run := mustRun(t, k.Kernel, s.ID, "save")
		assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
		evs := logOf(t, k.Kernel, s.ID)
		all, err := k.Approvals(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		for _, a := range all {
			assert.Equal(t, kernel.ApprovalDenied, a.State)
			assert.Equal(t, "denied: no decision within 50ms", resultOf(evs, a.ToolCallID))
		}
		aguitest.Verify(t, evs)
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "gated")
		run, pending := awaitApprovals(t, k, rec, s.ID)
		cancelled, err := k.CancelRun(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		assert.Equal(t, session.RunCancelled, cancelled.State)
		all, err := k.Approvals(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		assert.Equal(t, kernel.ApprovalCancelled, all[0].State)
		_, err = k.Decide(t.Context(), s.ID, run.ID, pending[0].ToolCallID, true, "")
		requireCode(t, err, errdefs.ErrConflict, "approval_decided")
		evs := logOf(t, k.Kernel, s.ID)
		assert.NotEmpty(t, resultOf(evs, pending[0].ToolCallID), "the dangling call is closed")
		checkHistory(t, historyOf(t, k.Kernel, s.ID))
		aguitest.Verify(t, evs)
		next, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "next"})
		require.NoError(t, err, "a new run is accepted after the cancel")
		_, err = k.CancelRun(t.Context(), s.ID, next.ID)
		require.NoError(t, err)
	})

	t.Run("a decision on a run that is not waiting", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		run := runToEnd(t, k.Kernel, rec, s.ID, "hi")
		_, err := k.Decide(t.Context(), s.ID, run.ID, "call_x", true, "")
		requireCode(t, err, errdefs.ErrNotFound, "approval_not_found")
	})
}

// decideAtOnce is an observer that approves each call the moment its
// request is seen, as a fast client watching the stream would.
type decideAtOnce struct {
	k    *kernel.Kernel
	errs chan error
}

func (d *decideAtOnce) ObserveEvents(evs []session.Event) {
	for _, ev := range evs {
		if ev.Type != session.EventCustom || ev.Member("name") != "kerneld.approval.requested" {
			continue
		}
		id := wireValue(ev)["toolCallId"].(string)
		_, err := d.k.Decide(context.Background(), ev.SessionID, ev.RunID, id, true, "")
		d.errs <- err
	}
}

func (d *decideAtOnce) ObserveSessionEnded(string, int64) {}

// wireValue returns a CUSTOM event's value.
func wireValue(ev session.Event) map[string]any {
	v, _ := ev.Fields()["value"].(map[string]any)
	return v
}

// TestKernel_DecideOnSight: a request is decidable from the moment anyone
// can see it.
func TestKernel_DecideOnSight(t *testing.T) {
	d := &decideAtOnce{errs: make(chan error, 2)}
	k, rec := newKernel(t, kerneltest.Options{Observers: []kernel.Observer{d}})
	d.k = k.Kernel
	s := mustSession(t, k.Kernel, "gated")
	run := mustRun(t, k.Kernel, s.ID, "save a and b")
	for range 2 {
		require.NoError(t, <-d.errs)
	}
	assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
	all, err := k.Approvals(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{kernel.ApprovalApproved, kernel.ApprovalApproved}, []string{all[0].State, all[1].State})
}

// TestKernel_ApprovalSurvivesRestart: kerneld stops while a run waits for
// approvals; at the next start the run waits again, with its deadline,
// and a decision then carries it on to its end.
func TestKernel_ApprovalSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kerneld.db")
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	k1, rec1 := newKernel(t, kerneltest.Options{Store: db})
	s := mustSession(t, k1.Kernel, "gated")
	run, pending := awaitApprovals(t, k1, rec1, s.ID)
	_, err = k1.Decide(t.Context(), s.ID, run.ID, pending[0].ToolCallID, false, "no")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		all, _ := k1.Approvals(t.Context(), s.ID, run.ID)
		return all[0].State == kernel.ApprovalDenied
	}, waitTimeout, time.Millisecond)
	require.NoError(t, k1.Close(context.Background()))
	require.NoError(t, db.Close())

	db, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	k2, rec2 := newKernel(t, kerneltest.Options{Store: db})
	assert.Equal(t, session.RunWaitingInput, mustGetRun(t, k2.Kernel, s.ID, run.ID).State, "a stop leaves it waiting")
	_, err = k2.Recover(t.Context())
	require.NoError(t, err)
	again, err := k2.Approvals(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.True(t, pending[1].ExpiresAt.Equal(again[1].ExpiresAt), "the deadline is kept: %v, was %v", again[1].ExpiresAt, pending[1].ExpiresAt)
	_, err = k2.Decide(t.Context(), s.ID, run.ID, pending[1].ToolCallID, true, "")
	require.NoError(t, err)
	assert.Equal(t, session.RunSucceeded, waitRun(t, k2.Kernel, rec2, s.ID, run.ID).State)
	_, err = k2.GetMemory(t.Context(), s.ID, "b")
	require.NoError(t, err, "the call approved after the restart ran")
	evs := logOf(t, k2.Kernel, s.ID)
	assert.Equal(t, "denied: no", resultOf(evs, pending[0].ToolCallID))
	checkLog(t, s.ID, evs)
	aguitest.Verify(t, evs)
	checkHistory(t, historyOf(t, k2.Kernel, s.ID))
}

// TestKernel_ApprovalKeepsItsExpiry: kerneld stops while a run waits for
// an approval, beside a call still running; at the next start, with the
// agent now wanting that call approved too, the run asks for it, and the
// approval asked before the stop keeps its expiry: by the restarted
// kernel's clock, an hour and more later, it has expired and the call is
// denied, while the new request waits out its own hour.
func TestKernel_ApprovalKeepsItsExpiry(t *testing.T) {
	agent := func(waitRef string) string {
		return `
name: mixed
description: saves with permission while it waits
model:
  provider: scripted
  script:
    - {text: "Saving.", tool_calls: [{name: memory_set, arguments: {key: a, value: 1}}, {name: wait}]}
    - {text: "Done."}
tools: [{name: memory_set, require_approval: true}, ` + waitRef + `]
approval_timeout: 1h
`
	}
	path := filepath.Join(t.TempDir(), "kerneld.db")
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	k1, _ := newKernel(t, kerneltest.Options{Store: db, Agents: []string{agent("wait")}})
	s := mustSession(t, k1.Kernel, "mixed")
	run := mustRun(t, k1.Kernel, s.ID, "save a")
	<-k1.Wait.Started()
	var asked kernel.Approval
	require.Eventually(t, func() bool {
		all, err := k1.Approvals(t.Context(), s.ID, run.ID)
		if err != nil || len(all) != 1 {
			return false
		}
		asked = all[0]
		return mustGetRun(t, k1.Kernel, s.ID, run.ID).State == session.RunWaitingInput
	}, waitTimeout, time.Millisecond)
	require.NoError(t, k1.Close(context.Background())) // the wait call is cut: no result
	require.NoError(t, db.Close())

	db, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	later := &clock{}
	later.Advance(time.Hour + time.Minute)
	k2, rec2 := newKernel(t, kerneltest.Options{Store: db, Now: later.Now,
		Agents: []string{agent("{name: wait, require_approval: true}")}})
	_, err = k2.Recover(t.Context())
	require.NoError(t, err)

	var all []kernel.Approval
	require.Eventually(t, func() bool {
		all, err = k2.Approvals(t.Context(), s.ID, run.ID)
		return err == nil && len(all) == 2 && all[0].State != kernel.ApprovalPending
	}, waitTimeout, time.Millisecond, "the approval asked before the stop expires at its own time")
	assert.Equal(t, asked.ToolCallID, all[0].ToolCallID)
	assert.Equal(t, kernel.ApprovalDenied, all[0].State)
	assert.True(t, asked.ExpiresAt.Equal(all[0].ExpiresAt), "expires_at %v, was %v", all[0].ExpiresAt, asked.ExpiresAt)
	assert.Equal(t, kernel.ApprovalPending, all[1].State, "the new request waits")
	assert.True(t, all[1].ExpiresAt.After(asked.ExpiresAt.Add(time.Hour)), "the new request has an hour from the restart")

	_, err = k2.Decide(t.Context(), s.ID, run.ID, all[1].ToolCallID, false, "not now")
	require.NoError(t, err)
	assert.Equal(t, session.RunSucceeded, waitRun(t, k2.Kernel, rec2, s.ID, run.ID).State)
	evs := logOf(t, k2.Kernel, s.ID)
	assert.Equal(t, "denied: no decision within 1h0m0s", resultOf(evs, asked.ToolCallID))
	_, err = k2.GetMemory(t.Context(), s.ID, "a")
	require.ErrorIs(t, err, errdefs.ErrNotFound, "the expired call did not run")
	checkLog(t, s.ID, evs)
	aguitest.Verify(t, evs)
	checkHistory(t, historyOf(t, k2.Kernel, s.ID))
}
