package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// Updates are optimistic: each carries the Version it read, applies only
// if the stored record is still at it, and moves the stored Version on by
// one. A stale update changes nothing: not the record, not what listings
// select it by.

var versionTests = []test{
	{"a session update moves its version on", testSessionVersion},
	{"a stale session update changes nothing", testSessionStale},
	{"a run update moves its version on", testRunVersion},
	{"a stale run update changes nothing", testRunStale},
}

// requireStale fails t unless err is session.ErrStale.
func requireStale(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, session.ErrStale)
	requireErr(t, err, errdefs.ErrConflict, "stale_record")
}

func testSessionVersion(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	for want := int64(1); want <= 3; want++ {
		read := mustGetSession(t, st, s.ID)
		read.Name = fmt.Sprint("update ", want)
		require.NoError(t, st.UpdateSession(ctx, read))
		got := mustGetSession(t, st, s.ID)
		assert.Equal(t, want, got.Version)
		assert.Equal(t, read.Name, got.Name)
	}
	listed, err := st.ListSessions(ctx, kernel.SessionQuery{})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.EqualValues(t, 3, listed[0].Version, "Version in ListSessions")

	// Appends move LastSeq, not the version.
	mustAppendEvents(t, st, newEvents(s.ID, 0, 2))
	assert.EqualValues(t, 3, mustGetSession(t, st, s.ID).Version)
}

func testSessionStale(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st, updated(50), func(s *session.Session) { s.Metadata = map[string]string{"user": "alice"} })
	first, second := mustGetSession(t, st, s.ID), mustGetSession(t, st, s.ID)
	first.Name, first.UpdatedAt = "first writer", at(51)
	require.NoError(t, st.UpdateSession(ctx, first))

	// The second writer read the same version: its update is refused
	// whole, the fields that indexes select by included.
	second.Name, second.State, second.Agent = "second writer", session.StateClosed, "coder"
	second.Metadata = map[string]string{"user": "bob"}
	second.ExpiresAt, second.UpdatedAt, second.ForkedFrom = at(1), at(1), newID()
	requireStale(t, st.UpdateSession(ctx, second))
	got := mustGetSession(t, st, s.ID)
	first.Version++
	assert.Equal(t, normSession(first), normSession(got))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{Metadata: map[string]string{"user": "bob"}}))
	assert.Equal(t, []string{s.ID}, listIDs(t, st, kernel.SessionQuery{Metadata: map[string]string{"user": "alice"}}))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{State: session.StateClosed}))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{Agent: "coder"}))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{ExpiresBefore: at(2)}))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{UpdatedBefore: at(2)}))
	assert.Empty(t, listIDs(t, st, kernel.SessionQuery{ForkedFrom: second.ForkedFrom}))

	// A version from the future is as stale as one from the past.
	second.Version = got.Version + 1
	requireStale(t, st.UpdateSession(ctx, second))
	assert.Equal(t, normSession(first), normSession(mustGetSession(t, st, s.ID)))

	// Read again, the second writer succeeds.
	again := mustGetSession(t, st, s.ID)
	again.Name = "second writer, again"
	require.NoError(t, st.UpdateSession(ctx, again))
	assert.EqualValues(t, 2, mustGetSession(t, st, s.ID).Version)
}

func testRunVersion(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	r := mustCreateRun(t, st, s.ID)
	for want := int64(1); want <= 3; want++ {
		read := mustGetRun(t, st, s.ID, r.ID)
		read.Usage.OutputTokens = want
		require.NoError(t, st.UpdateRun(ctx, read))
		got := mustGetRun(t, st, s.ID, r.ID)
		assert.Equal(t, want, got.Version)
		assert.Equal(t, want, got.Usage.OutputTokens)
	}
	listed, err := st.ListRuns(ctx, s.ID, session.RunQuery{})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.EqualValues(t, 3, listed[0].Version, "Version in ListRuns")
	byState, err := st.ListRunsByState(ctx, session.RunQueued)
	require.NoError(t, err)
	require.Len(t, byState, 1)
	assert.EqualValues(t, 3, byState[0].Version, "Version in ListRunsByState")
}

func testRunStale(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	r := mustCreateRun(t, st, s.ID, created(1, session.RunQueued, "k"))
	first, second := mustGetRun(t, st, s.ID, r.ID), mustGetRun(t, st, s.ID, r.ID)
	require.NoError(t, first.Transition(session.RunRunning, at(2)))
	require.NoError(t, st.UpdateRun(ctx, first))

	// The second writer read the same version: its cancel is refused
	// whole, the state that listings select by included.
	require.NoError(t, second.Transition(session.RunCancelled, at(3)))
	second.CancelRequested, second.IdempotencyKey = true, "other"
	requireStale(t, st.UpdateRun(ctx, second))
	first.Version++
	assert.Equal(t, normRun(first), normRun(mustGetRun(t, st, s.ID, r.ID)))
	cancelled, err := st.ListRunsByState(ctx, session.RunCancelled)
	require.NoError(t, err)
	assert.Empty(t, cancelled)
	listed, err := st.ListRuns(ctx, s.ID, session.RunQuery{States: []session.RunState{session.RunRunning}})
	require.NoError(t, err)
	assert.Equal(t, []string{r.ID}, runIDs(listed))
	_, err = st.FindRunByIdempotencyKey(ctx, s.ID, "other", at(0))
	requireNotFound(t, err, "run_not_found")

	second.Version = first.Version + 1
	requireStale(t, st.UpdateRun(ctx, second))

	// A missing run is not found, whatever its version.
	requireNotFound(t, st.UpdateRun(ctx, newRun(s.ID, func(r *session.Run) { r.Version = 5 })), "run_not_found")
}
