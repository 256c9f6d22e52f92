package sqlite

import (
	"context"
	"fmt"
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

// These tests queue writes of every kind behind hold, so that they share
// one transaction, and check each call gets its own outcome.

// newSession returns a top-level session that is not stored yet.
func newSession() session.Session {
	id := uuid.Must(uuid.NewV7()).String()
	now := time.Now().UTC().Truncate(time.Microsecond)
	return session.Session{ID: id, State: session.StateActive, RootID: id, CreatedAt: now, UpdatedAt: now}
}

// async runs call in a goroutine and returns its result.
func async(call func() error) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	return errc
}

// queued runs each call in a goroutine, one after another once the
// previous one is queued, so that they queue in order.
func queued(t *testing.T, s *Store, calls ...func() error) []<-chan error {
	t.Helper()
	n := len(s.reqs)
	results := make([]<-chan error, len(calls))
	for i, call := range calls {
		results[i] = async(call)
		waitQueued(t, s, n+i+1)
	}
	return results
}

func TestWriter_CreatesShareATransaction(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	taken := newSession()
	require.NoError(t, s.CreateSession(ctx, taken))
	release := hold(t, s)
	before := s.Stats()
	fresh := []session.Session{newSession(), newSession()}
	results := queued(t, s,
		func() error { return s.CreateSession(ctx, fresh[0]) },
		func() error { return s.CreateSession(ctx, taken) },
		func() error { return s.CreateSession(ctx, fresh[1]) },
	)
	release()

	require.NoError(t, <-results[0])
	err := <-results[1]
	require.ErrorIs(t, err, errdefs.ErrConflict, "a duplicate id fails alone")
	assert.Equal(t, "session_exists", string(errdefs.CodeOf(err)))
	require.NoError(t, <-results[2])
	for _, sess := range fresh {
		_, err := s.GetSession(ctx, sess.ID)
		require.NoError(t, err, "session %s", sess.ID)
	}
	after := s.Stats()
	assert.EqualValues(t, 2, after.Writes-before.Writes)
	assert.EqualValues(t, 2, after.Batches-before.Batches, "the held append's, then one for the creates")
}

func TestWriter_MissingSessionFailsAlone(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	id, gone := createSession(t, s), uuid.NewString()
	now := time.Now().UTC()
	token := tokenOf(s, id)
	release := hold(t, s)
	none := session.RunConstraints{}
	results := queued(t, s,
		func() error { return s.CreateRun(ctx, session.Run{SessionID: gone, ID: "r1", CreatedAt: now}, none) },
		func() error { return s.CreateRun(ctx, session.Run{SessionID: id, ID: "r1", CreatedAt: now}, none) },
		func() error { return s.UpdateRun(ctx, session.Run{SessionID: id, ID: "r2", CreatedAt: now}) },
		func() error {
			return s.AppendMessages(ctx, token, session.Message{SessionID: gone, ID: "m1", CreatedAt: now},
				session.Message{SessionID: gone, ID: "m2", CreatedAt: now})
		},
		func() error {
			return s.AppendMessages(ctx, token+1, session.Message{SessionID: id, ID: "m1", CreatedAt: now},
				session.Message{SessionID: id, ID: "m2", CreatedAt: now})
		},
		func() error {
			return s.PutMemory(ctx, session.MemoryEntry{SessionID: gone, Key: "k", UpdatedAt: now}, 0)
		},
		func() error {
			return s.PutMemory(ctx, session.MemoryEntry{SessionID: id, Key: "k", UpdatedAt: now}, 0)
		},
		func() error { return s.DeleteMemory(ctx, id, "other") },
		func() error { return s.AppendEvents(ctx, token, events(gone, 1)) },
		func() error { return s.AppendEvents(ctx, token+1, events(id, 1)) },
		func() error { return s.AppendEvents(ctx, token, events(id, 2)) },
	)
	release()

	want := []struct {
		kind error
		code string
	}{
		{errdefs.ErrNotFound, "session_not_found"}, {}, {errdefs.ErrNotFound, "run_not_found"},
		{errdefs.ErrNotFound, "session_not_found"}, {errdefs.ErrUnavailable, "lease_lost"},
		{errdefs.ErrNotFound, "session_not_found"}, {}, {errdefs.ErrNotFound, "memory_key_not_found"},
		{errdefs.ErrNotFound, "session_not_found"}, {errdefs.ErrUnavailable, "lease_lost"}, {},
	}
	for i, res := range results {
		err := <-res
		if want[i].kind == nil {
			assert.NoError(t, err, "call %d", i)
			continue
		}
		assert.ErrorIs(t, err, want[i].kind, "call %d", i)
		assert.Equal(t, want[i].code, string(errdefs.CodeOf(err)), "call %d", i)
	}
	msgs, err := s.ListMessages(ctx, id, 0, 0)
	require.NoError(t, err)
	assert.Empty(t, msgs, "a call that failed wrote none of its messages")
	got, err := s.GetSession(ctx, id)
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.LastSeq)
}

// TestWriter_DeleteAndRecreateInOneBatch queues appends around the
// deletion and re-creation of their session: each sees the session as the
// calls before it in the batch left it.
func TestWriter_DeleteAndRecreateInOneBatch(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	sess := newSession()
	require.NoError(t, s.CreateSession(ctx, sess))
	token := takeLease(t, s, sess.ID)
	release := hold(t, s)
	before, fenced := events(sess.ID, 2), events(sess.ID, 1)
	results := queued(t, s,
		func() error { return s.AppendEvents(ctx, token, before) },
		func() error { return s.DeleteSession(ctx, sess.ID) },
		func() error { return s.AppendEvents(ctx, token, events(sess.ID, 1)) },
		func() error { return s.CreateSession(ctx, sess) },
		func() error { return s.AppendEvents(ctx, token, fenced) },
	)
	release()

	require.NoError(t, <-results[0])
	assert.EqualValues(t, 1, before[0].Seq)
	require.NoError(t, <-results[1])
	require.ErrorIs(t, <-results[2], errdefs.ErrNotFound, "an append between delete and create")
	require.NoError(t, <-results[3])
	require.ErrorIs(t, <-results[4], session.ErrFenced, "the lease went with the deleted session")
	got, err := s.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Zero(t, got.LastSeq)

	after := events(sess.ID, 1)
	require.NoError(t, s.AppendEvents(ctx, takeLease(t, s, sess.ID), after))
	assert.EqualValues(t, 1, after[0].Seq, "the new session's log starts at 1")
	evs, err := s.ReadEvents(ctx, sess.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	got, err = s.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.LastSeq)
}

// TestWriter_FailingCallFailsAlone queues a call whose statement SQLite
// refuses between two good ones: the batch's transaction fails, and each
// call is written again alone, so only the culprit fails.
func TestWriter_FailingCallFailsAlone(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	id := createSession(t, s)
	release := hold(t, s)
	good := newSession()
	bad := func(tx *batchTx) (own, err error) {
		_, err = tx.conn.ExecContext(tx.ctx, `INSERT INTO sessions (id) VALUES ('incomplete')`)
		return nil, err
	}
	evs := events(id, 1)
	results := queued(t, s,
		func() error { return s.CreateSession(ctx, good) },
		func() error { return s.write(ctx, bad) },
		func() error { return appendEvents(ctx, s, evs) },
	)
	release()

	require.NoError(t, <-results[0])
	err := <-results[1]
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NOT NULL constraint failed")
	require.NoError(t, <-results[2])
	assert.EqualValues(t, 1, evs[0].Seq)
	_, err = s.GetSession(ctx, good.ID)
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx), "the last transaction committed")
}

func TestWriter_CancelledWhileQueued(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	release := hold(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	sess := newSession()
	results := queued(t, s, func() error { return s.CreateSession(ctx, sess) })
	cancel()
	require.ErrorIs(t, <-results[0], context.Canceled)
	release()
	_, err := s.GetSession(t.Context(), sess.ID)
	require.ErrorIs(t, err, errdefs.ErrNotFound, "an abandoned create is not written")
}

// TestWriter_CallerOrder has each of several goroutines update its own
// session over and over: whatever batches the calls land in, every
// goroutine's last update is the one stored.
func TestWriter_CallerOrder(t *testing.T) {
	const callers, updates = 8, 50
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	sessions := make([]session.Session, callers)
	var wg sync.WaitGroup
	for i := range sessions {
		sessions[i] = newSession()
		require.NoError(t, s.CreateSession(ctx, sessions[i]))
		wg.Go(func() {
			sess := sessions[i]
			for n := range updates {
				sess.Name = fmt.Sprintf("update %d", n)
				if err := s.UpdateSession(ctx, sess); err != nil {
					t.Error(err)
					return
				}
				sess.Version++
			}
			sessions[i] = sess
		})
	}
	wg.Wait()
	for _, want := range sessions {
		got, err := s.GetSession(ctx, want.ID)
		require.NoError(t, err)
		assert.Equal(t, want.Name, got.Name)
	}
}
