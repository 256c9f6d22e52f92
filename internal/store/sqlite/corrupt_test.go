package sqlite_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/store/sqlite/sqlitetest"
)

// writeRuns stores n sessions with a finished run each: enough for the
// runs_by_state index to need an interior page.
func writeRuns(t *testing.T, st *sqlite.Store, n int) {
	t.Helper()
	for range n {
		s := mustCreateSession(t, st)
		now := time.Now().UTC()
		require.NoError(t, st.CreateRun(t.Context(), session.Run{ID: newID(), SessionID: s.ID,
			State: session.RunSucceeded, Input: "hi", CreatedAt: now, StartedAt: now, EndedAt: now},
			session.RunConstraints{}))
	}
}

// TestStore_DiagnoseCorruption damages the index startup recovery reads
// to find running runs. Open does not read it, so it succeeds; the query
// that does fails, and Diagnose says the file looks corrupted and whether
// this process had written to it. Closing after that leaves the file's
// bytes as they were.
func TestStore_DiagnoseCorruption(t *testing.T) {
	ctx, path := t.Context(), tempPath(t)
	st := mustOpen(t, sqlite.Options{Path: path})
	writeRuns(t, st, 200)
	require.NoError(t, st.Close())
	sqlitetest.ZeroInteriorPage(t, path, "runs_by_state")
	damaged, err := os.ReadFile(path)
	require.NoError(t, err)

	st = mustOpen(t, sqlite.Options{Path: path})
	_, err = st.ListRunsByState(ctx, session.RunRunning)
	require.Error(t, err, "a query through the zeroed page")
	derr := st.Diagnose(err)
	var cerr *sqlite.CorruptError
	require.ErrorAs(t, derr, &cerr)
	assert.Equal(t, path, cerr.Path)
	assert.False(t, cerr.Modified, "nothing was written")
	assert.ErrorIs(t, derr, err, "the cause stays in the chain")
	assert.Contains(t, derr.Error(), "the database file looks corrupted and kerneld has not modified it")
	assert.Same(t, derr, st.Diagnose(derr), "diagnosed once")
	require.NoError(t, st.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, damaged, after, "the damaged file is unchanged")

	st = mustOpen(t, sqlite.Options{Path: path})
	mustCreateSession(t, st) // a write before the damage shows
	_, err = st.ListRunsByState(ctx, session.RunRunning)
	require.ErrorAs(t, st.Diagnose(err), &cerr)
	assert.True(t, cerr.Modified, "a session was written first")
	assert.Contains(t, cerr.Error(), "kerneld had already written to it")
}

func TestStore_DiagnoseOtherErrors(t *testing.T) {
	st := mustOpen(t, sqlite.Options{Path: tempPath(t)})
	require.NoError(t, st.Diagnose(nil))
	_, err := st.GetSession(t.Context(), "missing")
	require.Error(t, err)
	assert.Same(t, err, st.Diagnose(err), "not a damaged file: unchanged")
}
