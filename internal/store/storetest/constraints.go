package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateRun checks its constraints atomically with the insert: a taken
// idempotency key answers with the run that took it, a full queue refuses
// a queued run. When several checks fail, a taken run id is reported
// first, then a taken key, then a full queue: a replay is answered with
// its run even when the queue has filled since.

var constraintTests = []test{
	{"a taken key answers with the run that took it", testConstraintDuplicateKey},
	{"the key is checked only within its window", testConstraintKeyWindow},
	{"racing creates with one key store one run", testConstraintKeyRace},
	{"the queue bound refuses queued runs only", testConstraintQueue},
	{"failed checks are reported in order", testConstraintOrder},
}

// since returns constraints checking keys of runs created at or after
// at(n), with no queue bound.
func since(n int) session.RunConstraints { return session.RunConstraints{IdempotentSince: at(n)} }

// requireDuplicate fails t unless err is a *session.DuplicateRunError
// carrying want.
func requireDuplicate(t *testing.T, err error, want session.Run) {
	t.Helper()
	dup, ok := errors.AsType[*session.DuplicateRunError](err)
	require.True(t, ok, "error %v is not a *session.DuplicateRunError", err)
	requireErr(t, err, errdefs.ErrConflict, "idempotent_replay")
	assert.Equal(t, normRun(want), normRun(dup.Run), "the run that took the key")
}

// listAll returns every run of session id, newest first.
func listAll(t *testing.T, st kernel.Store, id string) []session.Run {
	t.Helper()
	runs, err := st.ListRuns(t.Context(), id, session.RunQuery{})
	require.NoError(t, err)
	return runs
}

func testConstraintDuplicateKey(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	first := newRun(s.ID, created(10, session.RunQueued, "k"), func(r *session.Run) {
		r.Input, r.IfBusy = "first", "queue"
	})
	require.NoError(t, st.CreateRun(ctx, first, since(0)))

	// The first run has moved on since: the replay answers with it as it
	// is now.
	require.NoError(t, first.Transition(session.RunRunning, at(11)))
	require.NoError(t, st.UpdateRun(ctx, first))
	first.Version++

	retry := newRun(s.ID, created(12, session.RunQueued, "k"), func(r *session.Run) { r.Input = "retry" })
	requireDuplicate(t, st.CreateRun(ctx, retry, since(0)), first)
	requireDuplicate(t, st.CreateRun(ctx, retry, since(10)), first)
	_, err := st.GetRun(ctx, s.ID, retry.ID)
	requireNotFound(t, err, "run_not_found")
	assert.Equal(t, []string{first.ID}, runIDs(listAll(t, st, s.ID)))

	// Keys are per session, and only a key that is set is checked.
	require.NoError(t, st.CreateRun(ctx, newRun(other.ID, created(12, session.RunQueued, "k")), since(0)))
	noKey := newRun(s.ID, created(13, session.RunSucceeded, ""))
	require.NoError(t, st.CreateRun(ctx, noKey, since(0)))
	require.NoError(t, st.CreateRun(ctx, newRun(s.ID, created(14, session.RunSucceeded, "")), since(0)))
	require.NoError(t, st.CreateRun(ctx, newRun(s.ID, created(15, session.RunSucceeded, "K")), since(0)), "keys are case sensitive")
	assert.Len(t, listAll(t, st, s.ID), 4)
}

func testConstraintKeyWindow(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	old := mustCreateRun(t, st, s.ID, created(10, session.RunSucceeded, "k"))

	// Created before the window: the key is free again.
	later := newRun(s.ID, created(100, session.RunQueued, "k"))
	require.NoError(t, st.CreateRun(ctx, later, since(11)))
	// The window starts at the creation instant, inclusive.
	requireDuplicate(t, st.CreateRun(ctx, newRun(s.ID, created(101, session.RunQueued, "k")), since(100)), later)
	// Zero IdempotentSince does not check the key at all.
	unchecked := newRun(s.ID, created(102, session.RunQueued, "k"))
	require.NoError(t, st.CreateRun(ctx, unchecked, session.RunConstraints{}))
	assert.Equal(t, []string{unchecked.ID, later.ID, old.ID}, runIDs(listAll(t, st, s.ID)))

	// With several runs under the key, the newest in the window answers,
	// as FindRunByIdempotencyKey finds it.
	requireDuplicate(t, st.CreateRun(ctx, newRun(s.ID, created(103, session.RunQueued, "k")), since(0)), unchecked)
}

func testConstraintKeyRace(t *testing.T, st kernel.Store) {
	const racers = 8
	ctx := t.Context()
	s := mustCreateSession(t, st)
	runs := make([]session.Run, racers)
	errs := make([]error, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runs {
		runs[i] = newRun(s.ID, created(1, session.RunQueued, "race"), func(r *session.Run) { r.Input = fmt.Sprint("racer ", i) })
		wg.Go(func() {
			<-start
			errs[i] = st.CreateRun(ctx, runs[i], session.RunConstraints{IdempotentSince: at(0), MaxQueued: racers})
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "racers %d and %d both created a run", winner, i)
			winner = i
		}
	}
	require.NotEqual(t, -1, winner, "no racer created a run: %v", errs)
	for i, err := range errs {
		if i != winner {
			requireDuplicate(t, err, runs[winner])
		}
	}
	assert.Equal(t, []string{runs[winner].ID}, runIDs(listAll(t, st, s.ID)))
	found, err := st.FindRunByIdempotencyKey(ctx, s.ID, "race", at(0))
	require.NoError(t, err)
	assert.Equal(t, runs[winner].ID, found.ID)
}

func testConstraintQueue(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	bound := session.RunConstraints{MaxQueued: 2}
	q1, q2 := newRun(s.ID), newRun(s.ID)
	require.NoError(t, st.CreateRun(ctx, q1, bound))
	require.NoError(t, st.CreateRun(ctx, q2, bound))

	full := newRun(s.ID)
	requireErr(t, st.CreateRun(ctx, full, bound), errdefs.ErrExhausted, "queue_full")
	_, err := st.GetRun(ctx, s.ID, full.ID)
	requireNotFound(t, err, "run_not_found")

	// Only queued runs count, and only a queued run is refused.
	require.NoError(t, st.CreateRun(ctx, newRun(s.ID, created(1, session.RunRunning, "")), bound))
	require.NoError(t, st.CreateRun(ctx, newRun(s.ID, created(1, session.RunSucceeded, "")), bound))
	require.NoError(t, st.CreateRun(ctx, newRun(other.ID), bound), "another session's queue")
	require.NoError(t, st.CreateRun(ctx, newRun(s.ID), session.RunConstraints{}), "no bound")
	require.NoError(t, st.CreateRun(ctx, newRun(s.ID), session.RunConstraints{MaxQueued: 4}))
	requireErr(t, st.CreateRun(ctx, newRun(s.ID), session.RunConstraints{MaxQueued: 4}), errdefs.ErrExhausted, "queue_full")

	// A queued run that leaves the queue frees its place.
	for _, r := range []session.Run{q1, q2} {
		require.NoError(t, r.Transition(session.RunCancelled, at(2)))
		require.NoError(t, st.UpdateRun(ctx, r))
	}
	require.NoError(t, st.CreateRun(ctx, full, session.RunConstraints{MaxQueued: 3}))
	requireErr(t, st.CreateRun(ctx, newRun(s.ID), session.RunConstraints{MaxQueued: 3}), errdefs.ErrExhausted, "queue_full")
	queued, err := st.ListRuns(ctx, s.ID, session.RunQuery{States: []session.RunState{session.RunQueued}})
	require.NoError(t, err)
	assert.Len(t, queued, 3)
}

func testConstraintOrder(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	taken := newRun(s.ID, created(1, session.RunQueued, "k"))
	require.NoError(t, st.CreateRun(ctx, taken, session.RunConstraints{IdempotentSince: at(0), MaxQueued: 1}))
	all := session.RunConstraints{IdempotentSince: at(0), MaxQueued: 1}

	// Same id, same key, full queue: the id.
	requireErr(t, st.CreateRun(ctx, taken, all), errdefs.ErrConflict, "run_exists")
	// New id, same key, full queue: the key.
	requireDuplicate(t, st.CreateRun(ctx, newRun(s.ID, created(2, session.RunQueued, "k")), all), taken)
	// New id, new key, full queue: the queue.
	requireErr(t, st.CreateRun(ctx, newRun(s.ID, created(2, session.RunQueued, "k2")), all), errdefs.ErrExhausted, "queue_full")
	assert.Equal(t, []string{taken.ID}, runIDs(listAll(t, st, s.ID)))
}
