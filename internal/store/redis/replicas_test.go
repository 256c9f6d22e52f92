package redis_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// Tests of the methods of the store contract for several replicas
// (versions, constrained run creation, leases, fenced appends), which the
// kernel does not call yet.

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// mustCreateSession stores a new session and returns it.
func mustCreateSession(tb testing.TB, st *redis.Store) session.Session {
	tb.Helper()
	id, now := newID(), time.Now().UTC().Truncate(time.Microsecond)
	s := session.Session{ID: id, Tenant: "acme", Agent: "helper", State: session.StateActive,
		RootID: id, CreatedAt: now, UpdatedAt: now}
	require.NoError(tb, st.CreateSession(tb.Context(), s))
	return s
}

// tokenEvents returns n TEXT_MESSAGE_CONTENT events of session sessionID
// with messageId writer.
func tokenEvents(sessionID, writer string, n int) []session.Event {
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.TextMessageContent(writer, fmt.Sprintf("token %d ", i))
		evs[i].SessionID, evs[i].RunID, evs[i].Time = sessionID, "run-1", time.Now()
	}
	return evs
}

// requireCoded fails t unless err is of kind, carries code and wraps
// target.
func requireCoded(t *testing.T, err, target, kind error, code string) {
	t.Helper()
	require.ErrorIs(t, err, target)
	require.ErrorIs(t, err, kind)
	assert.Equal(t, code, errdefs.CodeOf(err))
}

// leaseKey is where the store keeps session id's lease (see the package
// doc), for tests that wait for it to expire.
func leaseKey(srv redistest.Server, id string) string { return srv.Prefix + "{" + id + "}:lease" }

// waitExpired waits until session id's lease has expired in Redis.
func waitExpired(t *testing.T, srv redistest.Server, id string) {
	t.Helper()
	c := srv.Client(t)
	require.Eventually(t, func() bool {
		n, err := c.Exists(t.Context(), leaseKey(srv, id)).Result()
		return err == nil && n == 0
	}, 5*time.Second, 5*time.Millisecond, "lease of %s never expired", id)
}

func TestSessionVersions(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	require.NoError(t, st.AppendEvents(ctx, tokenEvents(s.ID, "m", 2)))

	read, err := st.GetSession(ctx, s.ID)
	require.NoError(t, err)
	read.Name = "first"
	require.NoError(t, st.UpdateSessionVersioned(ctx, read))
	got, err := st.GetSession(ctx, s.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version, "version after one update")
	assert.EqualValues(t, 2, got.LastSeq, "an update does not move LastSeq")

	read.Name = "lost update" // still carries Version 0
	requireCoded(t, st.UpdateSessionVersioned(ctx, read), session.ErrStale, errdefs.ErrConflict, "stale_record")
	got, err = st.GetSession(ctx, s.ID)
	require.NoError(t, err)
	assert.Equal(t, "first", got.Name, "a stale update changes nothing")
	assert.EqualValues(t, 1, got.Version)

	got.State = session.StateClosed
	require.NoError(t, st.UpdateSessionVersioned(ctx, got))
	closed, err := st.ListSessions(ctx, session.Query{State: session.StateClosed})
	require.NoError(t, err)
	require.Len(t, closed, 1, "a versioned update moves the indexes")
	assert.EqualValues(t, 2, closed[0].Version)

	missing := s
	missing.ID = newID()
	_, err = st.GetSession(ctx, missing.ID)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	require.ErrorIs(t, st.UpdateSessionVersioned(ctx, missing), errdefs.ErrNotFound)
}

func TestRunVersions(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	r := session.Run{ID: newID(), SessionID: s.ID, State: session.RunQueued, CreatedAt: time.Now()}
	require.NoError(t, st.CreateRun(ctx, r))

	require.NoError(t, r.Transition(session.RunRunning, time.Now()))
	require.NoError(t, st.UpdateRunVersioned(ctx, r))
	stale := r
	stale.State = session.RunCancelled
	requireCoded(t, st.UpdateRunVersioned(ctx, stale), session.ErrStale, errdefs.ErrConflict, "stale_record")

	got, err := st.GetRun(ctx, s.ID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, session.RunRunning, got.State, "a stale update changes nothing")
	assert.EqualValues(t, 1, got.Version)
	running, err := st.ListRunsByState(ctx, session.RunRunning, session.RunCancelled)
	require.NoError(t, err)
	assert.Equal(t, []string{r.ID}, runIDs(running), "the stale update left the state index alone")

	require.NoError(t, got.Transition(session.RunSucceeded, time.Now()))
	require.NoError(t, st.UpdateRunVersioned(ctx, got))
	got, err = st.GetRun(ctx, s.ID, r.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.Version)
	require.ErrorIs(t, st.UpdateRunVersioned(ctx, session.Run{ID: newID(), SessionID: s.ID}), errdefs.ErrNotFound)
}

func runIDs(rs []session.Run) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func TestCreateRunIdempotent(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	first := session.Run{ID: newID(), SessionID: s.ID, State: session.RunQueued, IdempotencyKey: "k", CreatedAt: t0}
	c := session.RunConstraints{IdempotentSince: t0.Add(-time.Hour)}
	require.NoError(t, st.CreateRunConstrained(ctx, first, c))

	again := first
	again.ID, again.CreatedAt = newID(), t0.Add(time.Second)
	err := st.CreateRunConstrained(ctx, again, c)
	require.ErrorIs(t, err, errdefs.ErrConflict)
	assert.Equal(t, "idempotent_replay", errdefs.CodeOf(err))
	var dup *session.DuplicateRunError
	require.ErrorAs(t, err, &dup)
	assert.Equal(t, first.ID, dup.Run.ID, "the duplicate carries the first run")

	later := session.RunConstraints{IdempotentSince: t0.Add(time.Millisecond)}
	require.NoError(t, st.CreateRunConstrained(ctx, again, later), "a key used before since is free again")
	unchecked := again
	unchecked.ID = newID()
	require.NoError(t, st.CreateRunConstrained(ctx, unchecked, session.RunConstraints{}), "a zero since checks no key")
	err = st.CreateRunConstrained(ctx, unchecked, session.RunConstraints{})
	require.ErrorIs(t, err, errdefs.ErrConflict)
	assert.Equal(t, "run_exists", errdefs.CodeOf(err))
}

func TestCreateRunIdempotentRace(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	const racers = 8
	c := session.RunConstraints{IdempotentSince: time.Now().Add(-time.Hour)}
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			r := session.Run{ID: newID(), SessionID: s.ID, State: session.RunQueued, IdempotencyKey: "k", CreatedAt: time.Now()}
			errs[i] = st.CreateRunConstrained(ctx, r, c)
		})
	}
	wg.Wait()
	var created int
	for _, err := range errs {
		var dup *session.DuplicateRunError
		switch {
		case err == nil:
			created++
		case !errors.As(err, &dup):
			t.Errorf("racer: %v", err)
		}
	}
	assert.Equal(t, 1, created, "racers storing a run")
	runs, err := st.ListRuns(ctx, s.ID, "", 0)
	require.NoError(t, err)
	assert.Len(t, runs, 1, "runs stored")
}

func TestCreateRunMaxQueued(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	c := session.RunConstraints{MaxQueued: 2}
	create := func(state session.RunState) (session.Run, error) {
		r := session.Run{ID: newID(), SessionID: s.ID, State: state, CreatedAt: time.Now()}
		return r, st.CreateRunConstrained(ctx, r, c)
	}
	q1, err := create(session.RunQueued)
	require.NoError(t, err)
	_, err = create(session.RunQueued)
	require.NoError(t, err)
	_, err = create(session.RunQueued)
	require.ErrorIs(t, err, errdefs.ErrExhausted)
	assert.Equal(t, "queue_full", errdefs.CodeOf(err))
	_, err = create(session.RunRunning)
	require.NoError(t, err, "only queued runs are bounded")

	require.NoError(t, q1.Transition(session.RunRunning, time.Now()))
	require.NoError(t, st.UpdateRun(ctx, q1))
	_, err = create(session.RunQueued)
	require.NoError(t, err, "a run leaving the queue makes room")
}

func TestLeaseHeldAndExpired(t *testing.T) {
	ctx, srv := t.Context(), redistest.Use(t)
	st := mustOpen(t, srv)
	s := mustCreateSession(t, st)

	a, err := st.AcquireLease(ctx, s.ID, "replica-a", 50*time.Millisecond)
	require.NoError(t, err)
	_, err = st.AcquireLease(ctx, s.ID, "replica-b", time.Minute)
	requireCoded(t, err, session.ErrLeaseHeld, errdefs.ErrConflict, "lease_held")
	assert.Contains(t, err.Error(), "replica-a", "the error names the holder")

	waitExpired(t, srv, s.ID)
	requireCoded(t, st.RenewLease(ctx, s.ID, a, time.Minute), session.ErrFenced, errdefs.ErrUnavailable, "lease_lost")
	b, err := st.AcquireLease(ctx, s.ID, "replica-b", time.Minute)
	require.NoError(t, err, "acquire an expired lease")
	assert.Greater(t, b, a, "tokens increase")

	require.NoError(t, st.ReleaseLease(ctx, s.ID, a), "releasing with a stale token")
	_, err = st.AcquireLease(ctx, s.ID, "replica-c", time.Minute)
	require.ErrorIs(t, err, session.ErrLeaseHeld, "a stale release leaves the lease alone")
	require.NoError(t, st.RenewLease(ctx, s.ID, b, time.Minute))
	require.NoError(t, st.ReleaseLease(ctx, s.ID, b))
	c, err := st.AcquireLease(ctx, s.ID, "replica-c", time.Minute)
	require.NoError(t, err, "acquire after a release, without waiting")
	assert.Greater(t, c, b)

	_, err = st.AcquireLease(ctx, newID(), "replica-a", time.Minute)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	_, err = st.AcquireLease(ctx, s.ID, "replica-a", 0)
	require.ErrorIs(t, err, errdefs.ErrInvalid)
}

func TestLeaseTokensIncrease(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	var last int64
	for i := range 20 {
		token, err := st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
		require.NoError(t, err)
		require.Greater(t, token, last, "token %d", i)
		last = token
		require.NoError(t, st.ReleaseLease(ctx, s.ID, token))
	}
	// A session deleted and created again under its id keeps the promise.
	require.NoError(t, st.DeleteSession(ctx, s.ID))
	require.NoError(t, st.CreateSession(ctx, s))
	token, err := st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
	require.NoError(t, err)
	assert.Greater(t, token, last, "token of the session created again")
}

func TestFencedAppendAfterExpiry(t *testing.T) {
	ctx, srv := t.Context(), redistest.Use(t)
	st := mustOpen(t, srv)
	s := mustCreateSession(t, st)
	token, err := st.AcquireLease(ctx, s.ID, "replica-a", 50*time.Millisecond)
	require.NoError(t, err)
	evs := tokenEvents(s.ID, "a", 3)
	require.NoError(t, st.AppendEventsFenced(ctx, token, evs))
	assert.EqualValues(t, 3, evs[2].Seq)
	msg := session.Message{ID: newID(), SessionID: s.ID, Role: session.RoleUser, Content: "hi"}
	require.NoError(t, st.AppendMessagesFenced(ctx, token, msg))

	waitExpired(t, srv, s.ID)
	late := tokenEvents(s.ID, "a", 2)
	requireCoded(t, st.AppendEventsFenced(ctx, token, late), session.ErrFenced, errdefs.ErrUnavailable, "lease_lost")
	assert.Zero(t, late[0].Seq, "seq of a fenced event")
	requireCoded(t, st.AppendMessagesFenced(ctx, token, msg), session.ErrFenced, errdefs.ErrUnavailable, "lease_lost")

	got, err := st.ReadEvents(ctx, s.ID, 0, 0)
	require.NoError(t, err)
	assert.Len(t, got, 3, "events after the fenced append")
	sess, err := st.GetSession(ctx, s.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 3, sess.LastSeq)
	msgs, err := st.ListMessages(ctx, s.ID, 0, 0)
	require.NoError(t, err)
	assert.Len(t, msgs, 1, "messages after the fenced append")

	require.ErrorIs(t, st.AppendEventsFenced(ctx, token, tokenEvents(newID(), "a", 1)), errdefs.ErrNotFound)
	other := msg
	other.SessionID = newID()
	require.ErrorIs(t, st.AppendMessagesFenced(ctx, token, msg, other), errdefs.ErrInvalid)
}

// TestFencedAppendRacesTakeOver has replica A append under a short lease
// that it never renews while replica B waits to take the session over.
// Once B holds the lease, no append of A may land: the log holds A's
// accepted appends, then B's, and nothing A was refused.
func TestFencedAppendRacesTakeOver(t *testing.T) {
	ctx, st := t.Context(), openStore(t)
	s := mustCreateSession(t, st)
	a, err := st.AcquireLease(ctx, s.ID, "replica-a", 30*time.Millisecond)
	require.NoError(t, err)

	var accepted int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := st.AppendEventsFenced(ctx, a, tokenEvents(s.ID, "a", 1))
			if err != nil {
				if !errors.Is(err, session.ErrFenced) {
					t.Errorf("replica a: %v", err)
				}
				return
			}
			accepted++
		}
	}()
	var b int64
	require.Eventually(t, func() bool {
		b, err = st.AcquireLease(ctx, s.ID, "replica-b", time.Minute)
		return err == nil
	}, 5*time.Second, time.Millisecond, "replica b never took the session over")
	require.NoError(t, st.AppendEventsFenced(ctx, b, tokenEvents(s.ID, "b", 5)))
	<-done

	evs, err := st.ReadEvents(ctx, s.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, accepted+5)
	for i, ev := range evs {
		want := "a"
		if i >= accepted {
			want = "b"
		}
		require.Equal(t, want, ev.Member("messageId"), "writer of seq %d", ev.Seq)
	}
	t.Logf("replica a appended %d events before it was fenced", accepted)
}

// TestDeleteSessionLeavesNoKeys checks that a session's keys and its
// entries in every index go with it: Redis drops a sorted set once it is
// empty, so after the only session is deleted no key is left.
func TestDeleteSessionLeavesNoKeys(t *testing.T) {
	ctx, srv := t.Context(), redistest.Use(t)
	st := mustOpen(t, srv)
	s := mustCreateSession(t, st)
	s.State, s.ParentID, s.ExpiresAt = session.StateClosed, newID(), time.Now().Add(time.Hour)
	require.NoError(t, st.UpdateSession(ctx, s))
	for _, state := range []session.RunState{session.RunQueued, session.RunSucceeded} {
		r := session.Run{ID: newID(), SessionID: s.ID, State: state, IdempotencyKey: "k", CreatedAt: time.Now()}
		require.NoError(t, st.CreateRun(ctx, r))
	}
	require.NoError(t, st.AppendMessages(ctx, session.Message{ID: newID(), SessionID: s.ID, Role: session.RoleUser}))
	require.NoError(t, st.PutMemory(ctx, session.MemoryEntry{SessionID: s.ID, Key: "k", Value: []byte(`1`)}, 0))
	require.NoError(t, st.AppendEvents(ctx, tokenEvents(s.ID, "m", 2)))
	_, err := st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
	require.NoError(t, err)
	require.Greater(t, len(srv.Keys(t)), 10, "keys of a populated session")

	require.NoError(t, st.DeleteSession(ctx, s.ID))
	assert.Empty(t, srv.Keys(t), "keys left after the delete")
}
