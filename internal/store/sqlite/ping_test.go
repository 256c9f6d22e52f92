package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// setMaxPageCount sets the writer connection's page limit and returns the
// limit SQLite settled on: never below the database's current size.
func setMaxPageCount(t *testing.T, s *Store, pages int64) int64 {
	t.Helper()
	// Not t.Context(): a cleanup calls this after that is cancelled.
	got, err := s.LimitPages(context.Background(), pages)
	require.NoError(t, err)
	return got
}

// bulkyEvents returns n events of session id, each with a delta of about
// 2 KiB, so that appending them needs new pages.
func bulkyEvents(id string, n int) []session.Event {
	evs := make([]session.Event, n)
	for i := range evs {
		evs[i] = session.TextMessageContent("m1", strings.Repeat("x", 2048))
		evs[i].SessionID, evs[i].Time = id, time.Now()
	}
	return evs
}

// TestStore_PingReportsFailingWriter fills the database to a page limit on
// the writer's connection, which fails appends the way a full disk does
// (SQLITE_FULL), and checks Ping reports it while reads still succeed,
// then recovers once an append commits again.
func TestStore_PingReportsFailingWriter(t *testing.T) {
	ctx := t.Context()
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	id := createSession(t, s)
	require.NoError(t, appendEvents(ctx, s, events(id, 1)))
	require.NoError(t, s.Ping(ctx), "healthy store")

	// As low as SQLite allows: the current size. The cleanup lifts it
	// before Close, which writes.
	limit := setMaxPageCount(t, s, 1)
	t.Cleanup(func() { setMaxPageCount(t, s, 1<<30) })
	t.Logf("max_page_count = %d", limit)
	err := appendEvents(ctx, s, bulkyEvents(id, 64))
	require.Error(t, err, "an append past the page limit")
	assert.Contains(t, err.Error(), "database or disk is full")
	assert.ErrorIs(t, err, errdefs.ErrUnavailable, "a full disk is a retryable failure, not an internal one")
	_, isStorage := errors.AsType[*errdefs.StorageError](err)
	assert.True(t, isStorage, "%v is no *errdefs.StorageError", err)
	now := time.Now()
	err = s.CreateSession(ctx, session.Session{ID: session.NewID(), Name: strings.Repeat("n", 64<<10),
		State: session.StateActive, CreatedAt: now, UpdatedAt: now})
	assert.ErrorIs(t, err, errdefs.ErrUnavailable, "any write past the page limit")

	err = s.Ping(ctx)
	require.Error(t, err, "Ping while the writer fails")
	assert.Contains(t, err.Error(), "the last write failed")
	assert.Contains(t, err.Error(), "database or disk is full")
	evs, rerr := s.ReadEvents(ctx, id, 0, 0)
	require.NoError(t, rerr, "reads still work, which is why Ping must look at the writer")
	assert.Len(t, evs, 1, "the failed append left nothing behind")

	setMaxPageCount(t, s, 1<<30) // space again
	require.Error(t, s.Ping(ctx), "Ping keeps failing until an append commits")
	require.NoError(t, appendEvents(ctx, s, bulkyEvents(id, 64)))
	require.NoError(t, s.Ping(ctx), "Ping after an append committed again")
}
