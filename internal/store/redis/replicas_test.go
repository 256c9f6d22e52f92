package redis_test

import (
	"context"
	"fmt"
	"strings"
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

// Tests of what the Redis store adds to the conformance suite (storetest):
// leases kept as keys with a TTL, and the keys a session leaves behind.

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

// leases caches the token of the lease appendEvents takes on each
// session, by id (ids are unique across tests).
var leases struct {
	mu     sync.Mutex
	tokens map[string]int64
}

// appendEvents appends evs under a lease on their session, taken for an
// hour on first use.
func appendEvents(ctx context.Context, st *redis.Store, evs []session.Event) error {
	id := evs[0].SessionID
	leases.mu.Lock()
	token, ok := leases.tokens[id]
	if !ok {
		var err error
		if token, err = st.AcquireLease(ctx, id, "test", time.Hour); err != nil {
			leases.mu.Unlock()
			return err
		}
		if leases.tokens == nil {
			leases.tokens = make(map[string]int64)
		}
		leases.tokens[id] = token
	}
	leases.mu.Unlock()
	return st.AppendEvents(ctx, token, evs)
}

// requireCoded fails t unless err is of kind, carries code and wraps
// target.
func requireCoded(t *testing.T, err, target, kind error, code string) {
	t.Helper()
	require.ErrorIs(t, err, target)
	require.ErrorIs(t, err, kind)
	assert.Equal(t, code, string(errdefs.CodeOf(err)))
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

	_, err = st.AcquireLease(ctx, s.ID, "replica-a", 0)
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	require.ErrorIs(t, st.RenewLease(ctx, s.ID, c, time.Microsecond), errdefs.ErrInvalid)
}

// TestDeleteSessionLeavesNoKeys checks that a session's keys and its
// entries in every index go with it: Redis drops a sorted set once it is
// empty, so after the only session is deleted no key is left.
func TestDeleteSessionLeavesNoKeys(t *testing.T) {
	ctx, srv := t.Context(), redistest.Use(t)
	st := mustOpen(t, srv)
	s := mustCreateSession(t, st)
	s.State, s.ParentID, s.ForkedFrom, s.ExpiresAt = session.StateClosed, newID(), newID(), time.Now().Add(time.Hour)
	s.Metadata = map[string]string{"user": "alice", "a=b": "c:d"}
	require.NoError(t, st.UpdateSession(ctx, s))
	for _, state := range []session.RunState{session.RunQueued, session.RunSucceeded} {
		r := session.Run{ID: newID(), SessionID: s.ID, State: state, IdempotencyKey: "k", CreatedAt: time.Now()}
		require.NoError(t, st.CreateRun(ctx, r, session.RunConstraints{}))
	}
	token, err := st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, st.AppendMessages(ctx, token, session.Message{ID: newID(), SessionID: s.ID, Role: session.RoleUser}))
	require.NoError(t, st.PutMemory(ctx, session.MemoryEntry{SessionID: s.ID, Key: "k", Value: []byte(`1`)}, 0))
	require.NoError(t, st.AppendEvents(ctx, token, tokenEvents(s.ID, "m", 2)))
	keys := srv.Keys(t)
	require.Greater(t, len(keys), 15, "keys of a populated session")
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, srv.Prefix), "key %q outside the prefix", k)
	}

	require.NoError(t, st.DeleteSession(ctx, s.ID))
	assert.Empty(t, srv.Keys(t), "keys left after the delete")
}
