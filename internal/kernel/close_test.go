package kernel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

func TestKernel_Close(t *testing.T) {
	t.Run("interrupts active runs", testCloseInterrupts)
	t.Run("idle", testCloseIdle)
	t.Run("runs accepted while closing end before Close returns", testCloseRace)
}

// closeKernel closes k, failing the test if that takes too long.
func closeKernel(tb testing.TB, k *kernel.Kernel) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), waitTimeout)
	defer cancel()
	require.NoError(tb, k.Close(ctx))
}

func testCloseInterrupts(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	idle := mustSession(t, k.Kernel, "echo")
	runToEnd(t, k.Kernel, rec, idle.ID, "done already")
	type active struct {
		s   session.Session
		run session.Run
	}
	var runs []active
	for range 3 {
		s := mustSession(t, k.Kernel, "slow")
		run := mustRun(t, k.Kernel, s.ID, "talk")
		rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)
		runs = append(runs, active{s, run})
	}
	waiter := mustSession(t, k.Kernel, "waiter")
	runs = append(runs, active{waiter, mustRun(t, k.Kernel, waiter.ID, "wait")})
	select {
	case <-k.Wait.Started():
	case <-time.After(waitTimeout):
		t.Fatal("the wait tool was never called")
	}

	closeKernel(t, k.Kernel)

	for _, a := range runs {
		evs := verifiedLog(t, k.Kernel, a.s.ID)
		end := evs[len(evs)-1]
		require.Equal(t, session.EventRunError, end.Type, "session %s (%s)", a.s.ID, a.s.Agent)
		assert.Equal(t, "interrupted", end.Member("code"))
		got, err := k.GetRun(t.Context(), a.s.ID, a.run.ID)
		require.NoError(t, err)
		assert.Equal(t, session.RunInterrupted, got.State)
		require.NotNil(t, got.Error)
		assert.Equal(t, "interrupted", got.Error.Code)
		assert.Equal(t, end.Seq, got.EndSeq)
		s, err := k.GetSession(t.Context(), a.s.ID)
		require.NoError(t, err)
		assert.Equal(t, session.StateError, s.State)
		assert.Empty(t, s.ActiveRunID)
		checkHistory(t, historyOf(t, k.Kernel, a.s.ID))
	}
	s, err := k.GetSession(t.Context(), idle.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StateCompleted, s.State, "an idle session is left alone")

	_, _, err = k.Run(t.Context(), idle.ID, kernel.RunRequest{Input: "more"})
	requireCode(t, err, errdefs.ErrUnavailable, "shutting_down")
	requireCode(t, k.Ready(t.Context()), errdefs.ErrUnavailable, "shutting_down")
}

func testCloseIdle(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	require.NoError(t, k.Ready(t.Context()))
	s := mustSession(t, k.Kernel, "echo")
	closeKernel(t, k.Kernel)
	closeKernel(t, k.Kernel) // twice is fine
	_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hi"})
	requireCode(t, err, errdefs.ErrUnavailable, "shutting_down")
}

// testCloseRace closes kernels while runs are being accepted. When Close
// returns, every run the kernel accepted must have ended and been
// recorded, and nothing may be logged afterwards. A slow observer of
// RUN_STARTED holds runs in the middle of being accepted, so Close finds
// some there.
func testCloseRace(t *testing.T) {
	const rounds, n = 3, 32
	for round := range rounds {
		k, rec := newKernel(t, kerneltest.Options{
			Observers: []kernel.Observer{slowObserver{delay: 5 * time.Millisecond, typ: session.EventRunStarted}},
		})
		sessions := make([]session.Session, n)
		for i := range sessions {
			sessions[i] = mustSession(t, k.Kernel, "slow")
		}
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range sessions {
			wg.Go(func() {
				<-start
				_, _, errs[i] = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hi"})
			})
		}
		close(start)
		rec.waitFor(t, "a run to start", func() bool { return len(rec.events) > 0 })
		closeKernel(t, k.Kernel)

		var live []string
		for _, s := range sessions {
			runs, err := k.ListRuns(t.Context(), s.ID, kernel.PageRequest{})
			require.NoError(t, err)
			for _, r := range runs.Items {
				if !r.State.Terminal() {
					live = append(live, r.ID)
				}
			}
		}
		observed := totalEvents(rec)
		wg.Wait()
		closeKernel(t, k.Kernel) // waits for runs Close forgot
		assert.Empty(t, live, "round %d: Close returned while these runs were still running", round)
		assert.Equal(t, observed, totalEvents(rec), "round %d: events were logged after Close returned", round)
		for i, err := range errs {
			if err != nil && !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("round %d: run %d: %v", round, i, err)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// totalEvents counts every event rec has observed.
func totalEvents(rec *recorder) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, evs := range rec.events {
		n += len(evs)
	}
	return n
}
