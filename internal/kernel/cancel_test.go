package kernel_test

import (
	"cmp"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

func TestKernel_CancelRun(t *testing.T) {
	t.Run("mid-stream", testCancelMidStream)
	t.Run("mid-tool", testCancelMidTool)
	t.Run("ended run", testCancelEnded)
	t.Run("concurrent cancels", testCancelConcurrent)
	t.Run("not found", testCancelNotFound)
}

// cancelledEnd checks that evs end with a RUN_FINISHED cancelled for
// reason and returns it.
func cancelledEnd(t *testing.T, evs []session.Event, runID, reason string) session.Event {
	t.Helper()
	require.NotEmpty(t, evs)
	end := evs[len(evs)-1]
	require.Equal(t, session.EventRunFinished, end.Type, "last event %s", end.Data)
	assert.Equal(t, "cancelled", outcomeOf(end))
	assert.Equal(t, runID, end.Member("runId"))
	assert.Equal(t, reason, kerneldMeta(t, end)["reason"])
	return end
}

func testCancelMidStream(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "slow")
	run := mustRun(t, k.Kernel, s.ID, "talk")
	rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 4) // the input and three tokens

	got, err := k.CancelRun(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, session.RunCancelled, got.State, "CancelRun returns once the run has recorded its end")
	assert.Nil(t, got.Error)
	assert.False(t, got.EndedAt.IsZero())

	evs := verifiedLog(t, k.Kernel, s.ID)
	end := cancelledEnd(t, evs, run.ID, "cancelled")
	assert.Equal(t, end.Seq, got.EndSeq)
	textEnd := evs[len(evs)-2]
	require.Equal(t, session.EventTextMessageEnd, textEnd.Type, "the assistant's text must be closed before RUN_FINISHED")
	partial := textOf(evs, textEnd.Member("messageId"))
	const full = "a b c d e f g h i j k l m n o p q r s t u v w x y z"
	assert.NotEmpty(t, partial)
	assert.True(t, strings.HasPrefix(full, partial) && partial != full, "partial text %q", partial)

	sess, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StateCompleted, sess.State)
	assert.Empty(t, sess.ActiveRunID)

	msgs := historyOf(t, k.Kernel, s.ID)
	require.Equal(t, []session.Role{session.RoleUser, session.RoleAssistant}, roles(msgs))
	assert.Equal(t, partial, msgs[1].Content, "the partial answer is kept in the history")
	assert.Equal(t, textEnd.Member("messageId"), msgs[1].ID)

	// Cancelling again changes nothing.
	observed := len(rec.Events(s.ID))
	again, err := k.CancelRun(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, got, again)
	assert.Len(t, logOf(t, k.Kernel, s.ID), len(evs))
	assert.Len(t, rec.Events(s.ID), observed)
}

func testCancelMidTool(t *testing.T) {
	model := recordingModel(t,
		step{Text: "Waiting.", ToolCalls: []scriptedCall{{Name: "wait"}, {Name: "current_time"}}},
		step{Text: "Done."},
	)
	k, rec, wait := newSpecKernel(t, kernel.Limits{}, agents.Spec{
		Name: "waiter", Provider: model, Tools: toolRefs("wait", "current_time"),
	})
	s := mustSession(t, k, "waiter")
	run := mustRun(t, k, s.ID, "wait for it")
	select {
	case <-wait.Started():
	case <-time.After(waitTimeout):
		t.Fatal("the wait tool was never called")
	}

	got, err := k.CancelRun(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, session.RunCancelled, got.State)

	evs := logOf(t, k, s.ID)
	checkLog(t, s.ID, evs)
	cancelledEnd(t, evs, run.ID, "cancelled")
	names := map[string]string{}
	results := map[string]session.Event{}
	for _, ev := range evs {
		switch ev.Type {
		case session.EventToolCallStart:
			names[ev.Member("toolCallId")] = ev.Member("toolCallName")
		case session.EventToolCallResult:
			name := names[ev.Member("toolCallId")]
			assert.NotContains(t, results, name, "%s answered twice", name)
			results[name] = ev
		}
	}
	require.Contains(t, results, "wait")
	require.Contains(t, results, "current_time")
	assert.True(t, isErrorResult(t, results["wait"]), "the interrupted call gets an error result: %s", results["wait"].Data)

	msgs := historyOf(t, k, s.ID)
	checkHistory(t, msgs)
	var toolMsgs int
	for _, m := range msgs {
		if m.Role == session.RoleTool {
			toolMsgs++
		}
	}
	assert.Equal(t, 2, toolMsgs, "a tool message for every tool call")

	// The next run works and the model sees a valid conversation.
	wait.Release()
	before := len(model.Requests())
	next := runToEnd(t, k, rec, s.ID, "again")
	assert.Equal(t, session.RunSucceeded, next.State)
	reqs := model.Requests()[before:]
	require.NotEmpty(t, reqs)
	for i, req := range reqs {
		assert.NoError(t, conversationProblem(req.Messages), "request %d of the next run: %v", i, msgRoles(req.Messages))
	}
	assert.Equal(t, msgs[0].Content, reqs[0].Messages[0].Content, "the next run sees the cancelled run's history")
	verifiedLog(t, k, s.ID)
	checkHistory(t, historyOf(t, k, s.ID))
}

func testCancelEnded(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	run := runToEnd(t, k.Kernel, rec, s.ID, "hello")
	n := len(logOf(t, k.Kernel, s.ID))

	got, err := k.CancelRun(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, run, got)
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Len(t, logOf(t, k.Kernel, s.ID), n)
}

func testCancelConcurrent(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "slow")
	run := mustRun(t, k.Kernel, s.ID, "talk")
	rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)

	const n = 8
	got := make([]session.Run, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = k.CancelRun(t.Context(), s.ID, run.ID) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, session.RunCancelled, got[i].State, "cancel %d", i)
	}
	evs := logOf(t, k.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	assert.Equal(t, 1, count(evs, session.EventRunFinished))
}

func testCancelNotFound(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	other := mustSession(t, k.Kernel, "echo")
	run := runToEnd(t, k.Kernel, rec, s.ID, "hello")
	tests := []struct {
		name             string
		ctx              context.Context
		sessionID, runID string
		code             string
	}{
		{"malformed run id", t.Context(), s.ID, "nope", "run_not_found"},
		{"unknown run id", t.Context(), s.ID, "0190b1c4-7f3e-7cc0-8000-000000000000", "run_not_found"},
		{"run of another session", t.Context(), other.ID, run.ID, "run_not_found"},
		{"malformed session id", t.Context(), "nope", run.ID, "session_not_found"},
		{"other tenant", kernel.WithTenant(t.Context(), "other"), s.ID, run.ID, "session_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := k.CancelRun(tt.ctx, tt.sessionID, tt.runID)
			requireCode(t, err, errdefs.ErrNotFound, tt.code)
		})
	}
}

// mustSQLite opens a SQLite store in a temp file, closed when the test
// ends. Unlike the memory store, its reads fail once their context is
// cancelled, which is how a stopped run's late store call shows.
func mustSQLite(tb testing.TB) *sqlite.Store {
	tb.Helper()
	db, err := sqlite.Open(tb.Context(), sqlite.Options{Path: filepath.Join(tb.TempDir(), "kerneld.db")})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// TestKernel_StopMidToolSQLite: a run stopped while its tools run ends as
// its stop says, cancelled or interrupted, on the SQLite store too, where
// a store read made after the stop fails; never as an internal failure.
func TestKernel_StopMidToolSQLite(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stop   func(t *testing.T, k *kerneltest.Kernel, s session.Session, run session.Run)
		want   session.RunState
		reason string
	}{
		{"cancel", func(t *testing.T, k *kerneltest.Kernel, s session.Session, run session.Run) {
			_, err := k.CancelRun(t.Context(), s.ID, run.ID)
			require.NoError(t, err)
		}, session.RunCancelled, session.ReasonCancelled},
		{"interrupt", func(t *testing.T, k *kerneltest.Kernel, s session.Session, _ session.Run) {
			post(t, k.Kernel, s.ID, "instead", kernel.BusyInterrupt)
			k.Wait.Release() // the interrupting run calls wait too
		}, session.RunInterrupted, session.ReasonInterrupted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, rec := newKernel(t, kerneltest.Options{Store: mustSQLite(t)})
			s := mustSession(t, k.Kernel, "waiter")
			run := post(t, k.Kernel, s.ID, "wait for it", kernel.BusyReject)
			<-k.Wait.Started()
			tt.stop(t, k, s, run)
			end := rec.WaitRunEnd(t, s.ID, run.ID)
			require.Equal(t, session.EventRunFinished, end.Type, "the run ended with %s", end.Data)
			assert.Equal(t, tt.reason, kerneldMeta(t, end)["reason"])
			got := waitRun(t, k.Kernel, rec, s.ID, run.ID)
			assert.Equal(t, tt.want, got.State)
			assert.Nil(t, got.Error)
			k.Wait.Release()
			waitIdle(t, k.Kernel, s.ID)
			evs := logOf(t, k.Kernel, s.ID)
			checkLog(t, s.ID, evs)
			checkHistory(t, historyOf(t, k.Kernel, s.ID))
		})
	}
}

// stopOnToolResult is a store that lets a test stop a run the moment the
// run records its first tool result: after its tool calls, before its
// next model call. If the stop lands only after stop returns, the next
// ListMemory (the next model call's first read) waits for it to land.
type stopOnToolResult struct {
	kernel.Store
	stop  func(result session.Message, landsLater func()) // calls landsLater if its stop lands after it returns
	once  sync.Once
	armed atomic.Bool // the next ListMemory waits for the stop
}

func (s *stopOnToolResult) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	err := s.Store.AppendMessages(ctx, token, msgs...)
	if err == nil && msgs[0].Role == session.RoleTool {
		s.once.Do(func() { s.stop(msgs[0], func() { s.armed.Store(true) }) })
	}
	return err
}

func (s *stopOnToolResult) ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error) {
	if s.armed.CompareAndSwap(true, false) {
		select {
		case <-ctx.Done():
		case <-time.After(waitTimeout):
		}
	}
	return s.Store.ListMemory(ctx, sessionID)
}

// TestKernel_StopBeforeNextModelCall: a stop that lands after a run's tool
// calls have all returned, before its next model call, ends the run as the
// stop says, on the SQLite store too, where the next call's reads fail.
func TestKernel_StopBeforeNextModelCall(t *testing.T) {
	for _, tt := range []struct {
		policy kernel.BusyPolicy // how the run is stopped; "" is CancelRun
		want   session.RunState
		reason string
	}{
		{"", session.RunCancelled, session.ReasonCancelled},
		{kernel.BusyInterrupt, session.RunInterrupted, session.ReasonInterrupted},
	} {
		t.Run(string(cmp.Or(tt.policy, "cancel")), func(t *testing.T) {
			var k *kerneltest.Kernel
			var wg sync.WaitGroup
			var stopErr error
			st := &stopOnToolResult{Store: mustSQLite(t)}
			st.stop = func(result session.Message, landsLater func()) {
				if tt.policy == "" { // CancelRun waits for the run's end, so not here
					landsLater()
					wg.Go(func() { _, stopErr = k.CancelRun(context.Background(), result.SessionID, result.RunID) })
					return
				}
				_, _, stopErr = k.Run(context.Background(), result.SessionID, kernel.RunRequest{Input: "instead", IfBusy: tt.policy})
			}
			k, rec := newKernel(t, kerneltest.Options{Store: st})
			s := mustSession(t, k.Kernel, "tooluser")
			run := post(t, k.Kernel, s.ID, "what time is it?", kernel.BusyReject)
			end := rec.WaitRunEnd(t, s.ID, run.ID)
			wg.Wait()
			require.NoError(t, stopErr)
			require.Equal(t, session.EventRunFinished, end.Type, "the run ended with %s", end.Data)
			assert.Equal(t, tt.reason, kerneldMeta(t, end)["reason"])
			assert.Equal(t, tt.want, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
			for _, r := range waitIdle(t, k.Kernel, s.ID) {
				if r.ID != run.ID {
					assert.Equal(t, session.RunSucceeded, r.State, "the interrupting run")
				}
			}
			checkLog(t, s.ID, logOf(t, k.Kernel, s.ID))
			checkHistory(t, historyOf(t, k.Kernel, s.ID))
		})
	}
}
