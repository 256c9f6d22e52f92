package kernel_test

import (
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

// testRunIdempotency checks Idempotency-Key handling: within the window a
// key names one run, whatever happens meanwhile.
func testRunIdempotency(t *testing.T) {
	t.Run("same key while running", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		first, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		assert.False(t, replayed)
		assert.Equal(t, "k1", first.IdempotencyKey)

		again, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		assert.True(t, replayed)
		assert.Equal(t, first.ID, again.ID)
		_, err := k.CancelRun(t.Context(), s.ID, first.ID)
		require.NoError(t, err)
		assert.Len(t, listRuns(t, k.Kernel, s.ID), 1)
		assert.Equal(t, 1, count(logOf(t, k.Kernel, s.ID), session.EventRunStarted))
	})

	t.Run("same key after the run ended", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		first, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		ended := waitRun(t, k.Kernel, rec, s.ID, first.ID)

		again, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		assert.True(t, replayed)
		assert.Equal(t, ended, again, "the replay returns the run as it is now")
		assert.Len(t, listRuns(t, k.Kernel, s.ID), 1)
		assert.Len(t, historyOf(t, k.Kernel, s.ID), 2, "the input was not added twice")
	})

	t.Run("same key at once", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		const n = 16
		runs := make([]session.Run, n)
		replays := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				runs[i], replays[i], errs[i] = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
			})
		}
		close(start)
		wg.Wait()
		fresh := 0
		for i := range n {
			require.NoError(t, errs[i])
			assert.Equal(t, runs[0].ID, runs[i].ID)
			if !replays[i] {
				fresh++
			}
		}
		assert.Equal(t, 1, fresh, "exactly one request starts the run")
		_, err := k.CancelRun(t.Context(), s.ID, runs[0].ID)
		require.NoError(t, err)
		assert.Len(t, listRuns(t, k.Kernel, s.ID), 1)
	})

	t.Run("different key", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		first, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k2"})
		requireCode(t, err, errdefs.ErrConflict, "session_busy")
		_, err = k.CancelRun(t.Context(), s.ID, first.ID)
		require.NoError(t, err)

		second, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k2"})
		assert.False(t, replayed)
		assert.NotEqual(t, first.ID, second.ID)
		_, err = k.CancelRun(t.Context(), s.ID, second.ID)
		require.NoError(t, err)
		waitRun(t, k.Kernel, rec, s.ID, second.ID)
		assert.Len(t, listRuns(t, k.Kernel, s.ID), 2)
	})

	t.Run("no key", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		first := runToEnd(t, k.Kernel, rec, s.ID, "hi")
		second, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi"})
		assert.False(t, replayed)
		assert.NotEqual(t, first.ID, second.ID)
		waitRun(t, k.Kernel, rec, s.ID, second.ID)
	})

	t.Run("key of another session", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		a, b := mustSession(t, k.Kernel, "echo"), mustSession(t, k.Kernel, "echo")
		ra, _ := startRun(t, k.Kernel, a.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		rb, replayed := startRun(t, k.Kernel, b.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		assert.False(t, replayed)
		assert.NotEqual(t, ra.ID, rb.ID)
		waitRun(t, k.Kernel, rec, a.ID, ra.ID)
		waitRun(t, k.Kernel, rec, b.ID, rb.ID)
	})

	t.Run("window", func(t *testing.T) {
		tests := []struct {
			name         string
			later        time.Duration
			wantReplayed bool
		}{
			{"inside", 23 * time.Hour, true},
			{"outside", 25 * time.Hour, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var c clock
				k, rec := newKernel(t, kerneltest.Options{Now: c.Now})
				s := mustSession(t, k.Kernel, "echo")
				first, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
				waitRun(t, k.Kernel, rec, s.ID, first.ID)

				c.Advance(tt.later)
				again, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
				assert.Equal(t, tt.wantReplayed, replayed)
				assert.Equal(t, tt.wantReplayed, again.ID == first.ID)
				waitRun(t, k.Kernel, rec, s.ID, again.ID)
				want := 2
				if tt.wantReplayed {
					want = 1
				}
				assert.Len(t, listRuns(t, k.Kernel, s.ID), want)
			})
		}
	})

	t.Run("configured window", func(t *testing.T) {
		var c clock
		k, rec := newKernel(t, kerneltest.Options{Now: c.Now, Limits: kernel.Limits{IdempotencyWindow: time.Minute}})
		s := mustSession(t, k.Kernel, "echo")
		first, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		waitRun(t, k.Kernel, rec, s.ID, first.ID)
		c.Advance(2 * time.Minute)
		again, replayed := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "hi", IdempotencyKey: "k1"})
		assert.False(t, replayed)
		assert.NotEqual(t, first.ID, again.ID)
		waitRun(t, k.Kernel, rec, s.ID, again.ID)
	})
}

// listRuns returns every run of a session, newest first.
func listRuns(tb testing.TB, k *kernel.Kernel, sessionID string) []session.Run {
	tb.Helper()
	page, err := k.ListRuns(tb.Context(), sessionID, kernel.PageRequest{Limit: kernel.MaxPageSize})
	require.NoError(tb, err)
	return page.Items
}
