package sqlite

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// A reader prepares a statement once and runs it again as it is, and
// keeps at most maxReaderStmts: past them a statement is parsed for its
// one use, with the same results.
func TestReaders_KeepStatementsPrepared(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	r, err := s.acquire(ctx)
	require.NoError(t, err)
	defer s.release(r)

	var n int
	require.NoError(t, r.queryRow(ctx, `SELECT ? + 1`, 1).Scan(&n))
	first := r.stmts[`SELECT ? + 1`]
	require.NotNil(t, first)
	require.NoError(t, r.queryRow(ctx, `SELECT ? + 1`, 2).Scan(&n))
	assert.Equal(t, 3, n)
	assert.Same(t, first, r.stmts[`SELECT ? + 1`], "prepared again")

	for i := range maxReaderStmts + 10 {
		require.NoError(t, r.queryRow(ctx, `SELECT ? + `+strconv.Itoa(i), 1).Scan(&n))
		assert.Equal(t, 1+i, n)
	}
	assert.Len(t, r.stmts, maxReaderStmts)
}

// ReadEvents runs in a read transaction of its own and ends it, also when
// it fails half-way: a transaction left open would hold a snapshot that
// keeps checkpoints from the end of the WAL.
func TestReaders_ReadTransactionEnds(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	id := createSession(t, s)
	_, err := s.ReadEvents(ctx, id, 0, 0)
	require.NoError(t, err)
	_, err = s.ReadEvents(ctx, "missing", 0, 0)
	require.ErrorIs(t, err, errdefs.ErrNotFound)

	for range cap(s.idle) { // every reader, whichever the reads had
		r, err := s.acquire(ctx)
		require.NoError(t, err)
		defer s.release(r)
		if r.conn != nil {
			require.NoError(t, r.exec(ctx, `BEGIN`), "a transaction is still open")
			r.end()
		}
	}
}

// A read waiting for a reader gives up when its context ends, and reads
// after Close fail as unavailable once the reads in flight have ended.
func TestReaders_WaitAndClose(t *testing.T) {
	s := mustOpenInternal(t, filepath.Join(t.TempDir(), "kerneld.db"))
	ctx := t.Context()
	var held []*reader
	for range cap(s.idle) {
		r, err := s.acquire(ctx)
		require.NoError(t, err)
		held = append(held, r)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := s.GetSession(short, "any")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while reads were in flight")
	case <-time.After(20 * time.Millisecond):
	}
	for _, r := range held {
		s.release(r)
	}
	require.NoError(t, <-closed)
	_, err = s.GetSession(ctx, "any")
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
}
