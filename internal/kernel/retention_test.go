package kernel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

func TestKernel_Sweep(t *testing.T) {
	t.Run("idle sessions close, then go", func(t *testing.T) {
		c := &clock{}
		k, rec := newKernel(t, kerneltest.Options{Now: c.Now, Retention: kernel.Retention{DeleteAfter: 24 * time.Hour}})
		s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", TTL: time.Hour})
		require.NoError(t, err)
		assert.Equal(t, time.Hour, s.TTL)
		assert.WithinDuration(t, c.Now().Add(time.Hour), s.ExpiresAt, time.Second)
		keep := mustSession(t, k.Kernel, "echo") // no TTL, no default: never expires

		c.Advance(30 * time.Minute)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, session.StateActive, mustGet(t, k.Kernel, s.ID).State, "not yet idle for an hour")

		c.Advance(31 * time.Minute)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, session.StateClosed, mustGet(t, k.Kernel, s.ID).State)
		assert.Len(t, rec.Ended(s.ID), 1, "its streams were told")

		c.Advance(23 * time.Hour)
		require.NoError(t, k.Sweep(t.Context()))
		mustGet(t, k.Kernel, s.ID) // closed, still readable

		c.Advance(2 * time.Hour)
		require.NoError(t, k.Sweep(t.Context()))
		_, err = k.GetSession(t.Context(), s.ID)
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		assert.Equal(t, session.StateActive, mustGet(t, k.Kernel, keep.ID).State)
	})

	t.Run("a run keeps a session alive", func(t *testing.T) {
		c := &clock{}
		k, rec := newKernel(t, kerneltest.Options{Now: c.Now, Retention: kernel.Retention{TTL: time.Hour}})
		s := mustSession(t, k.Kernel, "echo")
		assert.Equal(t, time.Hour, s.TTL, "the default TTL applies")
		c.Advance(50 * time.Minute)
		runToEnd(t, k.Kernel, rec, s.ID, "still here")
		c.Advance(50 * time.Minute)
		require.NoError(t, k.Sweep(t.Context()))
		assert.NotEqual(t, session.StateClosed, mustGet(t, k.Kernel, s.ID).State)
	})

	t.Run("a run longer than the TTL keeps its session", func(t *testing.T) {
		c := &clock{}
		k, rec := newKernel(t, kerneltest.Options{Now: c.Now})
		s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "waiter", TTL: time.Minute})
		require.NoError(t, err)
		run := mustRun(t, k.Kernel, s.ID, "go")
		<-k.Wait.Started()
		assert.True(t, mustGet(t, k.Kernel, s.ID).ExpiresAt.IsZero(), "a busy session has no expiry")
		setExpiry(t, k, s.ID, c.Now().Add(-time.Second)) // as if set before the run, by an older kerneld
		c.Advance(2 * time.Minute)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, session.StateRunning, mustGet(t, k.Kernel, s.ID).State, "busy, not idle")
		assert.True(t, mustGet(t, k.Kernel, s.ID).ExpiresAt.IsZero(), "the sweep cleared the stale expiry")

		k.Wait.Release()
		ended := waitRun(t, k.Kernel, rec, s.ID, run.ID)
		assert.Equal(t, session.RunSucceeded, ended.State, "the run was left to finish")
		assert.WithinDuration(t, ended.EndedAt.Add(time.Minute), mustGet(t, k.Kernel, s.ID).ExpiresAt, time.Second,
			"idle time counts from the run's end")
		c.Advance(50 * time.Second)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, session.StateCompleted, mustGet(t, k.Kernel, s.ID).State)
		c.Advance(20 * time.Second)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, session.StateClosed, mustGet(t, k.Kernel, s.ID).State)
		assert.Len(t, rec.Ended(s.ID), 1, "its streams were told")
		checkLog(t, s.ID, logOf(t, k.Kernel, s.ID))
	})

	t.Run("an approval wait longer than the TTL keeps its session", func(t *testing.T) {
		c := &clock{}
		k, rec := newKernel(t, kerneltest.Options{Now: c.Now})
		s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "gated", TTL: time.Minute})
		require.NoError(t, err)
		run, pending := awaitApprovals(t, k, rec, s.ID)
		c.Advance(10 * time.Minute)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, session.StateWaitingInput, mustGet(t, k.Kernel, s.ID).State)
		for _, a := range pending {
			_, err := k.Decide(t.Context(), s.ID, run.ID, a.ToolCallID, true, "")
			require.NoError(t, err)
		}
		assert.Equal(t, session.RunSucceeded, waitRun(t, k.Kernel, rec, s.ID, run.ID).State)
	})

	t.Run("batches are bounded", func(t *testing.T) {
		c := &clock{}
		k, _ := newKernel(t, kerneltest.Options{Now: c.Now, Retention: kernel.Retention{TTL: time.Minute, Batch: 2}})
		var ids []string
		for range 5 {
			ids = append(ids, mustSession(t, k.Kernel, "echo").ID)
		}
		c.Advance(time.Hour)
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, 2, countClosed(t, k.Kernel, ids))
		require.NoError(t, k.Sweep(t.Context()))
		require.NoError(t, k.Sweep(t.Context()))
		assert.Equal(t, 5, countClosed(t, k.Kernel, ids))
	})

	t.Run("negative ttl", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", TTL: -time.Second})
		requireCode(t, err, errdefs.ErrInvalid, "")
	})
}

func mustGet(tb testing.TB, k *kernel.Kernel, id string) session.Session {
	tb.Helper()
	s, err := k.GetSession(tb.Context(), id)
	require.NoError(tb, err)
	return s
}

// setExpiry stores a new expiry on a session, behind the kernel's back.
func setExpiry(tb testing.TB, k *kerneltest.Kernel, id string, at time.Time) {
	tb.Helper()
	s, err := k.Store.GetSession(tb.Context(), id)
	require.NoError(tb, err)
	s.ExpiresAt = at
	require.NoError(tb, k.Store.UpdateSession(tb.Context(), s))
}

func countClosed(tb testing.TB, k *kernel.Kernel, ids []string) int {
	tb.Helper()
	n := 0
	for _, id := range ids {
		if mustGet(tb, k, id).State == session.StateClosed {
			n++
		}
	}
	return n
}
