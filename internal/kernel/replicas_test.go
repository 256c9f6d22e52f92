package kernel_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// bus carries signals between kernels of one process as Redis carries
// them between replicas: every kernel receives every signal.
type bus struct {
	mu      sync.Mutex
	kernels []*kernel.Kernel
}

func (b *bus) Publish(_ context.Context, sig kernel.Signal) error {
	b.mu.Lock()
	kernels := slices.Clone(b.kernels)
	b.mu.Unlock()
	for _, k := range kernels {
		k.Receive(sig)
	}
	return nil
}

// renewalStore is a store whose lease renewals can be made to fail, as
// they do for a replica cut off from Redis or paused past its lease.
type renewalStore struct {
	kernel.Store
	failRenewals atomic.Bool
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (s *renewalStore) RenewLease(ctx context.Context, id string, token int64, ttl time.Duration) error {
	if s.failRenewals.Load() {
		return errUnreachable
	}
	return s.Store.RenewLease(ctx, id, token, ttl)
}

// AcquireLease fails as well while renewals do: a replica cut off from
// Redis can take no lease, so it cannot take back the session it lost.
func (s *renewalStore) AcquireLease(ctx context.Context, id, holder string, ttl time.Duration) (int64, error) {
	if s.failRenewals.Load() {
		return 0, errUnreachable
	}
	return s.Store.AcquireLease(ctx, id, holder, ttl)
}

// replica is one of the kernels of replicasOn.
type replica struct {
	*kerneltest.Kernel
	rec   *recorder
	store *renewalStore
}

// replicasOn starts n kernels sharing store and a signal bus, with leases
// of ttl.
func replicasOn(t *testing.T, store kernel.Store, n int, ttl time.Duration) []replica {
	t.Helper()
	b := &bus{}
	out := make([]replica, n)
	for i := range out {
		rs := &renewalStore{Store: store}
		k, rec := newKernel(t, kerneltest.Options{Store: rs, Replication: kernel.Replication{
			Replica: string(rune('a' + i)), Signals: b, LeaseTTL: ttl, CheckInterval: 50 * time.Millisecond,
		}})
		out[i] = replica{Kernel: k, rec: rec, store: rs}
		b.mu.Lock()
		b.kernels = append(b.kernels, k.Kernel)
		b.mu.Unlock()
	}
	return out
}

// awaitEnd polls k until the run has ended and its session no longer
// names it: the run may end on any replica, so no observer sees it.
func awaitEnd(t *testing.T, k *kernel.Kernel, sessionID, runID string) session.Run {
	t.Helper()
	var run session.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = k.GetRun(t.Context(), sessionID, runID)
		require.NoError(t, err)
		s, err := k.GetSession(t.Context(), sessionID)
		require.NoError(t, err)
		return run.State.Terminal() && s.ActiveRunID != runID
	}, waitTimeout, time.Millisecond, "run %s did not end", runID)
	return run
}

// TestReplicas_AnyReplicaServes: a session's runs, cancels, queue,
// idempotency keys and approvals work through any replica, whichever one
// runs the session.
func TestReplicas_AnyReplicaServes(t *testing.T) {
	t.Run("cancel from another replica", func(t *testing.T) {
		rs := replicasOn(t, memory.New(), 2, 2*time.Second)
		s := mustSession(t, rs[0].Kernel.Kernel, "slow")
		run := mustRun(t, rs[1].Kernel.Kernel, s.ID, "hi")
		rs[1].rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 3)
		got, err := rs[0].CancelRun(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		assert.Equal(t, session.RunCancelled, got.State)
		assert.Equal(t, session.RunCancelled, awaitEnd(t, rs[0].Kernel.Kernel, s.ID, run.ID).State)
		checkLog(t, s.ID, logOf(t, rs[0].Kernel.Kernel, s.ID))
	})
	t.Run("queue posted over replicas runs in order", func(t *testing.T) {
		rs := replicasOn(t, memory.New(), 3, 2*time.Second)
		s := mustSession(t, rs[0].Kernel.Kernel, "slow")
		want := []string{post(t, rs[0].Kernel.Kernel, s.ID, "first", kernel.BusyReject).ID}
		for i, input := range []string{"second", "third", "fourth", "fifth"} {
			want = append(want, post(t, rs[(i+1)%3].Kernel.Kernel, s.ID, input, kernel.BusyQueue).ID)
		}
		awaitEnd(t, rs[2].Kernel.Kernel, s.ID, want[len(want)-1])
		evs := logOf(t, rs[1].Kernel.Kernel, s.ID)
		checkLog(t, s.ID, evs)
		assert.Equal(t, want, startedOrder(t, evs))
	})
	t.Run("one idempotency key, one run", func(t *testing.T) {
		rs := replicasOn(t, memory.New(), 2, 2*time.Second)
		s := mustSession(t, rs[0].Kernel.Kernel, "echo")
		ids := make([]string, 2)
		var wg sync.WaitGroup
		for i := range rs {
			wg.Go(func() {
				run, _, err := rs[i].Run(t.Context(), s.ID, kernel.RunRequest{Input: "once", IdempotencyKey: "k-1"})
				assert.NoError(t, err)
				ids[i] = run.ID
			})
		}
		wg.Wait()
		assert.Equal(t, ids[0], ids[1], "the replicas made two runs of one key")
		runs, err := rs[1].ListRuns(t.Context(), s.ID, kernel.PageRequest{})
		require.NoError(t, err)
		assert.Len(t, runs.Items, 1)
	})
	t.Run("an approval requested on one replica is decided on another", func(t *testing.T) {
		rs := replicasOn(t, memory.New(), 2, 2*time.Second)
		run, pending := awaitApprovals(t, rs[0].Kernel, rs[0].rec, mustSession(t, rs[0].Kernel.Kernel, "gated").ID)
		for _, a := range pending {
			_, err := rs[1].Decide(t.Context(), run.SessionID, run.ID, a.ToolCallID, true, "")
			require.NoError(t, err)
		}
		assert.Equal(t, session.RunSucceeded, awaitEnd(t, rs[1].Kernel.Kernel, run.SessionID, run.ID).State)
		checkLog(t, run.SessionID, logOf(t, rs[1].Kernel.Kernel, run.SessionID))
		checkHistory(t, historyOf(t, rs[1].Kernel.Kernel, run.SessionID))
	})
}

// TestReplicas_TakeOverWhenRenewalsFail cuts a replica off from its
// leases mid-run, as a partition or a pause past the TTL does. It must
// stop the run without writing once the lease may have expired; another
// replica must take the session over and continue the run to its end,
// keeping every event acknowledged before; and the cut-off replica, back
// again, must serve the session's next run.
func TestReplicas_TakeOverWhenRenewalsFail(t *testing.T) {
	const ttl = 300 * time.Millisecond
	rs := replicasOn(t, memory.New(), 2, ttl)
	a, b := rs[0], rs[1]
	s := mustSession(t, a.Kernel.Kernel, "slow")
	run := mustRun(t, a.Kernel.Kernel, s.ID, "hi")
	a.rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 3)
	a.store.failRenewals.Store(true)

	got := awaitEnd(t, b.Kernel.Kernel, s.ID, run.ID)
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Equal(t, 1, got.Resumes)
	assert.Equal(t, 1, got.Crashes, "a lost replica counts against max_resumes")
	require.Eventually(t, func() bool { return a.Stats().Leases == 0 }, waitTimeout, time.Millisecond,
		"the cut-off replica still holds the session")
	seen := a.rec.Events(s.ID)
	evs := logOf(t, b.Kernel.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	for i, ev := range seen {
		assert.Equal(t, ev.Seq, evs[i].Seq, "event %d the owner acknowledged", i)
		assert.Equal(t, ev.Type, evs[i].Type, "event %d the owner acknowledged", i)
	}
	resumed := customEvents(evs, session.CustomRunResumed)
	require.Len(t, resumed, 1)
	assert.Equal(t, session.ResumeTakeover, customValue(t, resumed[0])["reason"])
	assert.Equal(t, session.EventRunFinished, evs[len(evs)-1].Type)
	assert.Equal(t, int64(1), b.Stats().TakeOvers)
	checkHistory(t, historyOf(t, b.Kernel.Kernel, s.ID))
	assert.Equal(t, slowAnswer, lastAnswer(t, b.Kernel.Kernel, s.ID), "the whole answer, made again by the replica that took over")

	a.store.failRenewals.Store(false)
	next := mustRun(t, a.Kernel.Kernel, s.ID, "again")
	assert.Equal(t, evs[len(evs)-1].Seq+1, next.StartSeq)
	assert.Equal(t, session.RunSucceeded, awaitEnd(t, b.Kernel.Kernel, s.ID, next.ID).State)
	checkLog(t, s.ID, logOf(t, a.Kernel.Kernel, s.ID))
}
