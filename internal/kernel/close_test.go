package kernel_test

import (
	"context"
	"errors"
	"slices"
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
	t.Run("hands active runs off", testCloseHandsOff)
	t.Run("idle", testCloseIdle)
	t.Run("runs accepted while closing are ended or handed off before Close returns", testCloseRace)
}

// closeKernel closes k, failing the test if that takes too long.
func closeKernel(tb testing.TB, k *kernel.Kernel) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), waitTimeout)
	defer cancel()
	require.NoError(tb, k.Close(ctx))
}

// testCloseHandsOff closes a kernel under streaming runs, a run in a tool
// call and a run of an agent that does not continue runs. The first are
// left running for the next process, each saying on its record that it
// was handed off, with nothing more logged; the last ends interrupted as
// before. An idle session is left alone, and the kernel refuses new runs.
func testCloseHandsOff(t *testing.T) {
	agents := append(slices.Clone(kerneltest.DefaultAgents),
		"name: stubborn\non_crash: interrupt\nmodel: {provider: scripted, token_delay: 20ms, script: [{text: \""+slowAnswer+"\"}]}\n")
	k, rec := newKernel(t, kerneltest.Options{Agents: agents})
	idle := mustSession(t, k.Kernel, "echo")
	runToEnd(t, k.Kernel, rec, idle.ID, "done already")
	type active struct {
		s   session.Session
		run session.Run
	}
	var runs []active
	for _, agent := range []string{"slow", "slow", "stubborn"} {
		s := mustSession(t, k.Kernel, agent)
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
		got, err := k.GetRun(t.Context(), a.s.ID, a.run.ID)
		require.NoError(t, err)
		s, err := k.GetSession(t.Context(), a.s.ID)
		require.NoError(t, err)
		evs := logOf(t, k.Kernel, a.s.ID)
		if a.s.Agent == "stubborn" {
			end := evs[len(evs)-1]
			require.Equal(t, session.EventRunError, end.Type)
			assert.Equal(t, "interrupted", end.Member("code"))
			assert.Equal(t, session.RunInterrupted, got.State)
			assert.Equal(t, session.StateError, s.State)
			checkLog(t, a.s.ID, evs)
			continue
		}
		assert.Equal(t, session.RunRunning, got.State, "session %s (%s)", a.s.ID, a.s.Agent)
		assert.Equal(t, session.ResumeShutdown, got.Handoff, "session %s (%s)", a.s.ID, a.s.Agent)
		assert.Equal(t, a.run.ID, s.ActiveRunID, "the session still names its run")
		assert.False(t, evs[len(evs)-1].Type.Ends(), "nothing ends a handed-off run")
		assert.Equal(t, len(rec.Events(a.s.ID)), len(evs), "every logged event was observed")
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
// returns, every run the kernel accepted must have ended or been handed
// off (its record says so, for the next process), and nothing may be
// logged afterwards. A slow observer of RUN_STARTED holds runs in the
// middle of being accepted, so Close finds some there.
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
				if !r.State.Terminal() && r.State != session.RunQueued && r.Handoff != session.ResumeShutdown {
					live = append(live, r.ID)
				}
			}
		}
		observed := totalEvents(rec)
		wg.Wait()
		closeKernel(t, k.Kernel) // waits for runs Close forgot
		assert.Empty(t, live, "round %d: Close returned while these runs were still running, not handed off", round)
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
