package kernel_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
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

func post(tb testing.TB, k *kernel.Kernel, sessionID, input string, policy kernel.BusyPolicy) session.Run {
	tb.Helper()
	run, _, err := k.Run(tb.Context(), sessionID, kernel.RunRequest{Input: input, IfBusy: policy})
	require.NoError(tb, err)
	return run
}

// startedOrder returns the ids of the runs whose RUN_STARTED is in evs, in
// log order, and fails if two runs ever overlap.
func startedOrder(tb testing.TB, evs []session.Event) []string {
	tb.Helper()
	var order []string
	open := ""
	for _, ev := range evs {
		switch ev.Type {
		case session.EventRunStarted:
			require.Empty(tb, open, "run %s started while %s was running", ev.RunID, open)
			open = ev.RunID
			order = append(order, ev.RunID)
		case session.EventRunFinished, session.EventRunError:
			open = ""
		}
	}
	return order
}

func TestKernel_Queue(t *testing.T) {
	t.Run("queued runs start in order after the active one", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		first := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
		second := post(t, k.Kernel, s.ID, "second", kernel.BusyQueue)
		third := post(t, k.Kernel, s.ID, "third", kernel.BusyQueue)
		assert.Equal(t, session.RunQueued, second.State)
		assert.Zero(t, second.StartSeq)

		for _, r := range []session.Run{first, second, third} {
			assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, r.ID).State)
		}
		evs := logOf(t, k.Kernel, s.ID)
		assert.Equal(t, []string{first.ID, second.ID, third.ID}, startedOrder(t, evs))
		assert.Equal(t, []any{float64(1), float64(2)}, queuedPositions(evs), "each queued run was announced with its place")
		checkLog(t, s.ID, evs)
		aguitest.Verify(t, evs)
		assert.Equal(t, []session.Role{"user", "assistant", "user", "assistant", "user", "assistant"}, roles(historyOf(t, k.Kernel, s.ID)))
	})

	t.Run("many concurrent posts: none lost, FIFO, one run at a time", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxQueued: 64}})
		s := mustSession(t, k.Kernel, "echo")
		var mu sync.Mutex
		var runs []session.Run
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				r := post(t, k.Kernel, s.ID, "input", kernel.BusyQueue)
				mu.Lock()
				runs = append(runs, r)
				mu.Unlock()
			})
		}
		wg.Wait()
		ids := make([]string, len(runs))
		for i, r := range runs {
			ids[i] = r.ID
			assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, r.ID).State)
		}
		slices.Sort(ids) // ids are time-ordered: the order in which the kernel accepted them
		evs := logOf(t, k.Kernel, s.ID)
		assert.Equal(t, ids, startedOrder(t, evs), "started in the order accepted")
		checkLog(t, s.ID, evs)
	})

	t.Run("the queue is bounded", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxQueued: 2}})
		s := mustSession(t, k.Kernel, "waiter")
		post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
		<-k.Wait.Started() // from here steered input waits for the tool, holding its slot
		post(t, k.Kernel, s.ID, "second", kernel.BusyQueue)
		post(t, k.Kernel, s.ID, "third", kernel.BusySteer)
		_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "fourth", IfBusy: kernel.BusyQueue})
		requireCode(t, err, errdefs.ErrExhausted, "queue_full")
		k.Wait.Release()
	})

	t.Run("a cancelled queued run never starts", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		first := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
		queued := post(t, k.Kernel, s.ID, "second", kernel.BusyQueue)
		last := post(t, k.Kernel, s.ID, "third", kernel.BusyQueue)
		cancelled, err := k.CancelRun(t.Context(), s.ID, queued.ID)
		require.NoError(t, err)
		assert.Equal(t, session.RunCancelled, cancelled.State)
		again, err := k.CancelRun(t.Context(), s.ID, queued.ID)
		require.NoError(t, err)
		assert.Equal(t, cancelled, again, "idempotent")
		waitRun(t, k.Kernel, rec, s.ID, last.ID)
		evs := logOf(t, k.Kernel, s.ID)
		assert.Equal(t, []string{first.ID, last.ID}, startedOrder(t, evs))
		var notices []session.Event
		for _, ev := range evs {
			if ev.Type == session.EventCustom && ev.Member("name") == "kerneld.run.cancelled" {
				notices = append(notices, ev)
			}
		}
		require.Len(t, notices, 1, "one notice, for the one cancel that removed the run")
		assert.Equal(t, map[string]any{"runId": queued.ID}, notices[0].Fields()["value"])
		assert.Equal(t, first.ID, notices[0].RunID, "logged inside the active run")
		checkLog(t, s.ID, evs)
		aguitest.Verify(t, evs)
	})

	t.Run("deleting the session cancels its queue", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
		queued := post(t, k.Kernel, s.ID, "second", kernel.BusyQueue)
		require.NoError(t, k.DeleteSession(t.Context(), s.ID, false))
		_, err := k.Store.GetRun(t.Context(), s.ID, queued.ID)
		require.ErrorIs(t, err, errdefs.ErrNotFound)
	})
}

// queuedPositions returns the positions announced by kerneld.run.queued.
func queuedPositions(evs []session.Event) []any {
	var out []any
	for _, ev := range evs {
		if ev.Type == session.EventCustom && ev.Member("name") == "kerneld.run.queued" {
			out = append(out, ev.Fields()["value"].(map[string]any)["position"])
		}
	}
	return out
}

func TestKernel_Interrupt(t *testing.T) {
	for _, tt := range []struct {
		name, agent string
		ready       func(t *testing.T, k *kerneltest.Kernel, rec *recorder, s session.Session, run session.Run)
	}{
		{"mid-token", "slow", func(t *testing.T, _ *kerneltest.Kernel, rec *recorder, s session.Session, run session.Run) {
			rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 4)
		}},
		{"mid-tool", "waiter", func(t *testing.T, k *kerneltest.Kernel, _ *recorder, _ session.Session, _ session.Run) {
			<-k.Wait.Started()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, rec := newKernel(t, kerneltest.Options{})
			s := mustSession(t, k.Kernel, tt.agent)
			first := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
			tt.ready(t, k, rec, s, first)
			second := post(t, k.Kernel, s.ID, "stop, do this instead", kernel.BusyInterrupt)
			end := rec.WaitRunEnd(t, s.ID, first.ID)
			assert.Equal(t, "cancelled", outcomeOf(end))
			assert.Equal(t, session.ReasonInterrupted, kerneldMeta(t, end)["reason"])
			assert.Equal(t, session.RunInterrupted, waitRun(t, k.Kernel, rec, s.ID, first.ID).State)

			k.Wait.Release()
			waitRun(t, k.Kernel, rec, s.ID, second.ID)
			evs := logOf(t, k.Kernel, s.ID)
			assert.Equal(t, []string{first.ID, second.ID}, startedOrder(t, evs))
			checkLog(t, s.ID, evs)
			aguitest.Verify(t, evs)
			checkHistory(t, historyOf(t, k.Kernel, s.ID))
		})
	}
}

func TestKernel_Steer(t *testing.T) {
	t.Run("joins the run before its next model call", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "waiter")
		run := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
		<-k.Wait.Started()
		steered := post(t, k.Kernel, s.ID, "also check the weather", kernel.BusySteer)
		assert.Equal(t, session.RunQueued, steered.State, "the answer is the steer's own run")
		k.Wait.Release()
		assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
		joined := mustGetRun(t, k.Kernel, s.ID, steered.ID)
		assert.Equal(t, session.RunSteered, joined.State)
		assert.Equal(t, run.ID, joined.SteeredInto, "it names the run its input joined")

		history := historyOf(t, k.Kernel, s.ID)
		assert.Equal(t, []session.Role{"user", "assistant", "tool", "tool", "user", "assistant"}, roles(history))
		assert.Equal(t, "also check the weather", history[4].Content)
		evs := logOf(t, k.Kernel, s.ID)
		assert.Equal(t, []string{run.ID}, startedOrder(t, evs), "no second run")
		i := indexOf(evs, 0, func(ev session.Event) bool { return ev.Member("name") == "kerneld.run.steered" })
		require.GreaterOrEqual(t, i, 0)
		assert.Equal(t, session.EventTextMessageStart, evs[i+1].Type)
		aguitest.Verify(t, evs)
	})

	t.Run("becomes a queued run when no model call is left", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow") // one model call, streaming slowly
		run := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
		rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)
		post(t, k.Kernel, s.ID, "and then this", kernel.BusySteer)
		waitRun(t, k.Kernel, rec, s.ID, run.ID)
		runs := waitRuns(t, k.Kernel, s.ID, 2)
		assert.Equal(t, "and then this", runs[0].Input, "newest first")
		assert.Equal(t, session.RunSucceeded, runs[0].State)
		aguitest.Verify(t, logOf(t, k.Kernel, s.ID))
	})
}

// waitRuns waits until the session has n runs, all ended, newest first.
// It polls: a run's record is updated after its last event.
func waitRuns(t *testing.T, k *kernel.Kernel, sessionID string, n int) []session.Run {
	t.Helper()
	var runs []session.Run
	require.Eventually(t, func() bool {
		p, err := k.ListRuns(t.Context(), sessionID, kernel.PageRequest{})
		runs = p.Items
		return err == nil && len(runs) == n && runs[0].State.Terminal() && runs[n-1].State.Terminal()
	}, waitTimeout, time.Millisecond)
	return runs
}

// TestKernel_QueueSurvivesRestart: kerneld stops while a run waits in a
// tool call with runs queued behind it. When it starts again the run is
// continued (the cut call, not safe to retry, answered as one that may
// or may not have taken effect) and the queued runs start after it, in
// order.
func TestKernel_QueueSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kerneld.db")
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	k1, _ := newKernel(t, kerneltest.Options{Store: db})
	s := mustSession(t, k1.Kernel, "waiter")
	first := post(t, k1.Kernel, s.ID, "first", kernel.BusyReject)
	<-k1.Wait.Started()
	second := post(t, k1.Kernel, s.ID, "second", kernel.BusyQueue)
	third := post(t, k1.Kernel, s.ID, "third", kernel.BusyQueue)
	require.NoError(t, k1.Close(context.Background()))
	require.NoError(t, db.Close())

	db, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	k2, rec := newKernel(t, kerneltest.Options{Store: db})
	r, err := k2.GetRun(t.Context(), s.ID, second.ID)
	require.NoError(t, err)
	assert.Equal(t, session.RunQueued, r.State, "a stop leaves queued runs queued")
	_, err = k2.Recover(t.Context())
	require.NoError(t, err)
	waitRun(t, k2.Kernel, rec, s.ID, first.ID)
	k2.Wait.Release()
	waitRun(t, k2.Kernel, rec, s.ID, third.ID)
	continued := mustGetRun(t, k2.Kernel, s.ID, first.ID)
	assert.Equal(t, session.RunSucceeded, continued.State)
	assert.Equal(t, 1, continued.Resumes)
	assert.Equal(t, 0, continued.Crashes, "a shutdown is not a crash")
	assert.Equal(t, session.RunSucceeded, mustGetRun(t, k2.Kernel, s.ID, second.ID).State)
	evs := logOf(t, k2.Kernel, s.ID)
	assert.Equal(t, []string{first.ID, second.ID, third.ID}, startedOrder(t, evs))
	resumed := customEvents(runEvents(evs, first.ID), session.CustomRunResumed)
	require.Len(t, resumed, 1)
	assert.Equal(t, session.ResumeShutdown, customValue(t, resumed[0])["reason"])
	waitCall := callIDsOf(t, runEvents(evs, first.ID), "wait")
	require.Len(t, waitCall, 1)
	assert.Contains(t, resultOf(evs, waitCall[0]), "may or may not have taken effect")
	aguitest.Verify(t, evs)
	checkHistory(t, historyOf(t, k2.Kernel, s.ID))
}

func mustGetRun(tb testing.TB, k *kernel.Kernel, sessionID, runID string) session.Run {
	tb.Helper()
	r, err := k.GetRun(tb.Context(), sessionID, runID)
	require.NoError(tb, err)
	return r
}

// TestKernel_BusyUnderLoad posts many inputs at once to one session with
// every policy mixed: no input is lost or doubled (each reaches the
// history exactly once, as a run's input or a steer), two runs never
// overlap, and queued runs keep their order.
func TestKernel_BusyUnderLoad(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxQueued: 128}})
	s := mustSession(t, k.Kernel, "echo")
	policies := []kernel.BusyPolicy{kernel.BusyQueue, kernel.BusySteer, kernel.BusyInterrupt, kernel.BusyQueue}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var queued []string
	for i := range 40 {
		wg.Go(func() {
			input := "input " + itoa(i)
			policy := policies[i%len(policies)]
			run := post(t, k.Kernel, s.ID, input, policy)
			if policy == kernel.BusyQueue && run.State == session.RunQueued {
				mu.Lock()
				queued = append(queued, run.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	runs := waitIdle(t, k.Kernel, s.ID)
	for _, r := range runs {
		assert.Contains(t, []session.RunState{session.RunSucceeded, session.RunInterrupted, session.RunSteered}, r.State,
			"run %s (%q) was stopped only by an interrupt, if at all, or joined another as a steer", r.ID, r.Input)
		if r.State == session.RunSteered {
			assert.NotEmpty(t, r.SteeredInto, "steered run %s names no run it joined", r.ID)
		}
	}
	assert.NotEqual(t, session.StateRunning, mustGet(t, k.Kernel, s.ID).State)

	seen := map[string]int{}
	for _, m := range historyOf(t, k.Kernel, s.ID) {
		if m.Role == session.RoleUser {
			seen[m.Content]++
		}
	}
	for i := range 40 {
		assert.Equal(t, 1, seen["input "+itoa(i)], "input %d reached the history once", i)
	}
	evs := logOf(t, k.Kernel, s.ID)
	order := startedOrder(t, evs) // fails if two runs overlap
	slices.Sort(queued)
	var queuedStarts []string
	for _, id := range order {
		if slices.Contains(queued, id) {
			queuedStarts = append(queuedStarts, id)
		}
	}
	assert.True(t, slices.IsSorted(queuedStarts), "queued runs started in the order they were accepted")
	checkLog(t, s.ID, evs)
	aguitest.Verify(t, evs)
}

// waitIdle waits until every run of the session has ended and been
// recorded, and the session names no active run; it returns the runs,
// newest first. Between two queued runs the session stays running, so
// this is the moment its work is done.
func waitIdle(tb testing.TB, k *kernel.Kernel, sessionID string) []session.Run {
	tb.Helper()
	var runs []session.Run
	deadline := time.Now().Add(waitTimeout)
	for {
		runs = allRuns(tb, k, sessionID)
		done := mustGet(tb, k, sessionID).ActiveRunID == ""
		for _, r := range runs {
			done = done && r.State.Terminal()
		}
		if done {
			return runs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("session %s still busy after %v: runs %v", sessionID, waitTimeout, runStates(runs))
		}
		time.Sleep(time.Millisecond)
	}
}

// runStates returns each run's id and state, for failure messages.
func runStates(runs []session.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID + ":" + string(r.State)
	}
	return out
}

// TestKernel_StopAtHandoff: a stop that reaches a queued run after the
// session's driver picked it to start next, and before it started, stops
// that run alone: the runs queued behind it still run, in order. All the
// while the session shows running.
func TestKernel_StopAtHandoff(t *testing.T) {
	for _, tt := range []struct {
		name string
		// stop stops run at the gap and returns the run it posted, if any.
		stop func(t *testing.T, k *kerneltest.Kernel, run session.Run) *session.Run
		want session.RunState
	}{
		{"cancel", func(t *testing.T, k *kerneltest.Kernel, run session.Run) *session.Run {
			got, err := k.CancelRun(t.Context(), run.SessionID, run.ID)
			require.NoError(t, err)
			assert.Equal(t, session.RunCancelled, got.State)
			return nil
		}, session.RunCancelled},
		{"interrupt", func(t *testing.T, k *kerneltest.Kernel, run session.Run) *session.Run {
			next := post(t, k.Kernel, run.SessionID, "instead", kernel.BusyInterrupt)
			return &next
		}, session.RunInterrupted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gap := make(chan session.Run, 1)
			var once sync.Once
			var k *kerneltest.Kernel
			kernel.OnQueuedStart(t, func(ctx context.Context, run session.Run) {
				once.Do(func() {
					gap <- run
					waitStopRecorded(t, k.Store, run)
				})
			})
			k, rec := newKernel(t, kerneltest.Options{})
			s := mustSession(t, k.Kernel, "waiter")
			first := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
			<-k.Wait.Started()
			second := post(t, k.Kernel, s.ID, "second", kernel.BusyQueue)
			third := post(t, k.Kernel, s.ID, "third", kernel.BusyQueue)
			k.Wait.Release()
			at := receive(t, gap)
			require.Equal(t, second.ID, at.ID)
			sess := mustGet(t, k.Kernel, s.ID)
			assert.Equal(t, session.StateRunning, sess.State, "no idle gap between queued runs")

			posted := tt.stop(t, k, at)
			waitIdle(t, k.Kernel, s.ID)
			stopped := mustGetRun(t, k.Kernel, s.ID, second.ID)
			assert.Equal(t, tt.want, stopped.State)
			assert.Equal(t, session.RunSucceeded, mustGetRun(t, k.Kernel, s.ID, third.ID).State, "the queue carried on")
			want := []string{first.ID, third.ID}
			if posted != nil { // an interrupted run starts, to keep its input; the interrupting one goes next
				want = []string{first.ID, second.ID, posted.ID, third.ID}
			}
			evs := logOf(t, k.Kernel, s.ID)
			assert.Equal(t, want, startedOrder(t, evs))
			checkLog(t, s.ID, evs)
			aguitest.Verify(t, evs)
			checkHistory(t, historyOf(t, k.Kernel, s.ID))
			rec.WaitRunEnd(t, s.ID, third.ID)
		})
	}
}

// waitStopRecorded waits until a stop of run, queued, is in the store: a
// cancel request on it, or a run queued after it to interrupt.
func waitStopRecorded(t *testing.T, st kernel.Store, run session.Run) {
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		got, err := st.GetRun(context.Background(), run.SessionID, run.ID)
		if err != nil || got.CancelRequested {
			return
		}
		queued, err := st.ListRuns(context.Background(), run.SessionID, session.RunQuery{States: []session.RunState{session.RunQueued}})
		if err != nil {
			return
		}
		for _, q := range queued {
			if q.IfBusy == string(kernel.BusyInterrupt) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Error("no stop was recorded for the run about to start")
}

// TestKernel_QueueRacesHandoff: input queued while the active run ends is
// never stranded. The post below finds the run busy and, holding the
// session's lock, stores its queued run; only then does the active run go
// on to end and reach its handoff. The queued run must join the queue
// before handoff picks a successor, never after, when nobody would start
// it: handoff waits for the session's lock the post holds.
func TestKernel_QueueRacesHandoff(t *testing.T) {
	reached := make(chan string, 1)
	kernel.OnRunEnded(t, func(ended session.Run) {
		select {
		case reached <- ended.ID:
		default:
		}
	})
	var k *kerneltest.Kernel
	var handoffSeen atomic.Bool
	kernel.OnQueuedRecorded(t, func(session.Run) {
		k.Wait.Release() // the active run ends now, with the post still under way
		select {
		case <-reached:
			handoffSeen.Store(true)
		case <-time.After(waitTimeout):
		}
		time.Sleep(50 * time.Millisecond) // time to pick a successor, if nothing held handoff back
	})
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "waiter")
	first := post(t, k.Kernel, s.ID, "first", kernel.BusyReject)
	<-k.Wait.Started()
	queued := post(t, k.Kernel, s.ID, "second", kernel.BusyQueue)
	assert.Equal(t, session.RunQueued, queued.State, "queued behind the ending run")
	require.True(t, handoffSeen.Load(), "the active run reached its handoff while the post was storing its run")

	waitIdle(t, k.Kernel, s.ID)
	assert.Equal(t, session.RunSucceeded, mustGetRun(t, k.Kernel, s.ID, queued.ID).State)
	evs := logOf(t, k.Kernel, s.ID)
	assert.Equal(t, []string{first.ID, queued.ID}, startedOrder(t, evs))
	checkLog(t, s.ID, evs)
	rec.WaitRunEnd(t, s.ID, queued.ID)
}

// receive returns the next value from c, failing the test if none comes.
func receive[T any](tb testing.TB, c <-chan T) T {
	tb.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitTimeout):
		tb.Fatalf("nothing received after %v", waitTimeout)
	}
	var zero T
	return zero
}
