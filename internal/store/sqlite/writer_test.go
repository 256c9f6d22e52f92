package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// These tests reach into the writer to make writes queue on purpose:
// holding writeMu stops the writer just before its next transaction.

func mustOpenInternal(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// createSession stores a new session and takes its lease, which appends
// to it carry (see tokenOf).
func createSession(t *testing.T, s *Store) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	now := time.Now()
	require.NoError(t, s.CreateSession(t.Context(), session.Session{ID: id, State: session.StateActive,
		RootID: id, CreatedAt: now, UpdatedAt: now}))
	takeLease(t, s, id)
	return id
}

// takeLease takes session id's lease for an hour and returns its token.
func takeLease(t *testing.T, s *Store, id string) int64 {
	t.Helper()
	token, err := s.AcquireLease(t.Context(), id, "test", time.Hour)
	require.NoError(t, err)
	return token
}

// tokenOf returns the token of the lease session id holds, or 0 if none
// is held. It does not wait for the writer, which tests hold.
func tokenOf(s *Store, id string) int64 {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	return s.leases.held[id].token
}

// appendEvents appends evs under the lease their session holds.
func appendEvents(ctx context.Context, s *Store, evs []session.Event) error {
	return s.AppendEvents(ctx, tokenOf(s, evs[0].SessionID), evs)
}

func events(sessionID string, n int) []session.Event {
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.TextMessageContent("m1", "token ")
		evs[i].SessionID, evs[i].Time = sessionID, time.Now()
	}
	return evs
}

// hold makes the writer take a request of its own and stop before its
// transaction, until release is called (at the latest when t ends). Appends
// made meanwhile stay queued.
func hold(t *testing.T, s *Store) (release func()) {
	t.Helper()
	id := createSession(t, s)
	s.writeMu.Lock()
	var once sync.Once
	release = func() { once.Do(s.writeMu.Unlock) }
	t.Cleanup(release)
	r := &writeReq{evs: events(id, 1), token: tokenOf(s, id), done: make(chan struct{})}
	require.NoError(t, s.enqueue(t.Context(), r))
	require.Eventually(t, func() bool { return r.state.Load() == reqTaken }, 5*time.Second, time.Millisecond)
	return release
}

// appendAsync calls AppendEvents in a goroutine and returns its result.
func appendAsync(ctx context.Context, s *Store, evs []session.Event) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- appendEvents(ctx, s, evs) }()
	return errc
}

// waitQueued waits until n appends are queued.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(s.reqs) == n }, 5*time.Second, time.Millisecond)
}

func TestAppendEvents_CancelledWhileQueued(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	id := createSession(t, s)
	release := hold(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	evs := events(id, 2)
	errc := appendAsync(ctx, s, evs)
	waitQueued(t, s, 1)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	assert.Equal(t, []int64{0, 0}, []int64{evs[0].Seq, evs[1].Seq}, "seqs of an abandoned append")

	release()
	require.NoError(t, appendEvents(t.Context(), s, events(createSession(t, s), 1)), "the writer goes on")
	got, err := s.ReadEvents(t.Context(), id, 0, 0)
	require.NoError(t, err)
	assert.Empty(t, got, "an abandoned append is not written")
	assert.EqualValues(t, 2, s.Stats().Appends)
}

func TestAppendEvents_TakenWaitsForOutcome(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	id := createSession(t, s)
	s.writeMu.Lock()
	r := &writeReq{evs: events(id, 1), token: tokenOf(s, id), done: make(chan struct{})}
	require.NoError(t, s.enqueue(t.Context(), r))
	require.Eventually(t, func() bool { return r.state.Load() == reqTaken }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.await(ctx) }()
	select {
	case err := <-errc:
		t.Fatalf("await returned %v before the transaction ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.writeMu.Unlock()
	require.NoError(t, <-errc, "appended events are reported appended, whatever ctx says")
	assert.EqualValues(t, 1, r.evs[0].Seq)
}

func TestAppendEvents_MissingSessionFailsAlone(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	id := createSession(t, s)
	release := hold(t, s)
	good := appendAsync(t.Context(), s, events(id, 3))
	waitQueued(t, s, 1)
	missing := appendAsync(t.Context(), s, events(uuid.NewString(), 1))
	waitQueued(t, s, 2)
	release()

	require.NoError(t, <-good)
	err := <-missing
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	assert.Equal(t, "session_not_found", string(errdefs.CodeOf(err)))
	assert.Equal(t, Stats{Appends: 2, Events: 4, Commits: 2, Writes: 2, Batches: 4}, s.Stats(),
		"the two appends shared a transaction; the two creates had one each")
}

func TestClose_FlushesQueuedAppends(t *testing.T) {
	const n = 20
	path := filepath.Join(t.TempDir(), "kerneld.db")
	s := mustOpenInternal(t, path)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = createSession(t, s)
	}
	release := hold(t, s)
	results := make([]<-chan error, n)
	for i, id := range ids {
		results[i] = appendAsync(t.Context(), s, events(id, 2))
	}
	waitQueued(t, s, n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.Eventually(t, func() bool {
		s.sendMu.RLock()
		defer s.sendMu.RUnlock()
		return s.closed
	}, 5*time.Second, time.Millisecond)
	err := appendEvents(t.Context(), s, events(ids[0], 1))
	require.ErrorIs(t, err, errdefs.ErrUnavailable, "an append after Close began")

	release()
	require.NoError(t, <-closed)
	for i := range results {
		require.NoError(t, <-results[i], "queued append %d", i)
	}
	s = mustOpenInternal(t, path)
	for _, id := range ids {
		got, err := s.ReadEvents(t.Context(), id, 0, 0)
		require.NoError(t, err)
		assert.Len(t, got, 2, "events of session %s after reopening", id)
	}
}

// newCollector returns a Store with just enough set up to call collect.
func newCollector(maxBatch int, delay time.Duration) *Store {
	s := &Store{}
	s.init(Options{MaxBatch: maxBatch, BatchDelay: delay})
	return s
}

func queue(s *Store, sizes ...int) []*writeReq {
	var rs []*writeReq
	for _, n := range sizes {
		r := &writeReq{evs: make([]session.Event, n)}
		s.reqs <- r
		rs = append(rs, r)
	}
	return rs
}

func TestCollect_BatchSize(t *testing.T) {
	s := newCollector(8, time.Hour)
	rs := queue(s, 3, 3, 3, 10, 1)
	batch, carry, open := s.collect(nil, 1)
	assert.Equal(t, rs[:2], batch, "up to MaxBatch events")
	assert.Equal(t, rs[2], carry, "the request that did not fit starts the next batch")
	assert.True(t, open)
	batch, carry, _ = s.collect(carry, 1)
	assert.Equal(t, rs[2:3], batch)
	batch, carry, _ = s.collect(carry, 1)
	assert.Equal(t, rs[3:4], batch, "a request larger than MaxBatch commits alone")
	assert.Nil(t, carry)
	close(s.reqs)
	batch, _, open = s.collect(nil, 1)
	assert.Equal(t, rs[4:], batch)
	assert.False(t, open, "a closed queue ends the writer once drained")
}

func TestCollect_Waiting(t *testing.T) {
	t.Run("a lone caller does not wait", func(t *testing.T) {
		s := newCollector(8, time.Hour)
		rs := queue(s, 1)
		batch, _, _ := s.collect(nil, 1)
		assert.Equal(t, rs, batch)
	})
	t.Run("waits for as many as last time", func(t *testing.T) {
		s := newCollector(8, time.Hour)
		rs := queue(s, 1)
		go func() {
			time.Sleep(10 * time.Millisecond)
			s.reqs <- &writeReq{}
		}()
		batch, _, _ := s.collect(nil, 2)
		assert.Len(t, batch, 2)
		assert.Equal(t, rs[0], batch[0])
	})
	t.Run("but no longer than BatchDelay", func(t *testing.T) {
		s := newCollector(8, 20*time.Millisecond)
		queue(s, 1)
		start := time.Now()
		batch, _, _ := s.collect(nil, 5)
		assert.Len(t, batch, 1)
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	})
}
