package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var deleteTests = []test{
	{"delete removes everything the session owns", testDeleteCascade},
	{"delete leaves children and other sessions alone", testDeleteLeavesOthers},
	{"a deleted id starts afresh when created again", testDeleteRecreate},
}

// populate gives session sessionID a running run with idempotency key
// "k", two messages, the memory entry "k" and three events.
func populate(tb testing.TB, st kernel.Store, sessionID string) session.Run {
	tb.Helper()
	r := mustCreateRun(tb, st, sessionID, created(1, session.RunRunning, "k"))
	mustAppendMessages(tb, st, sessionID, 2)
	mustPutMemory(tb, st, sessionID, "k", `1`)
	mustAppendEvents(tb, st, newEvents(sessionID, 0, 3))
	return r
}

// requireIntact requires what populate wrote to session s to be there.
func requireIntact(t *testing.T, st kernel.Store, s session.Session, r session.Run) {
	t.Helper()
	assert.Equal(t, s.ParentID, mustGetSession(t, st, s.ID).ParentID)
	assert.EqualValues(t, 3, mustGetSession(t, st, s.ID).LastSeq)
	assert.Equal(t, normRun(r), normRun(mustGetRun(t, st, s.ID, r.ID)))
	assert.Len(t, mustListMessages(t, st, s.ID, 0, 0), 2)
	assert.Equal(t, []string{"k"}, keys(mustListMemory(t, st, s.ID)))
	assert.Equal(t, span(1, 3), seqs(mustReadEvents(t, st, s.ID, 0, 0)))
}

func testDeleteCascade(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	r := populate(t, st, s.ID)
	require.NoError(t, st.DeleteSession(ctx, s.ID))

	_, err := st.GetSession(ctx, s.ID)
	requireNotFound(t, err, "session_not_found")
	_, err = st.GetRun(ctx, s.ID, r.ID)
	requireNotFound(t, err, "")
	_, err = st.ListRuns(ctx, s.ID, session.RunQuery{})
	requireNotFound(t, err, "")
	_, err = st.FindRunByIdempotencyKey(ctx, s.ID, "k", at(0))
	requireNotFound(t, err, "")
	_, err = st.ListMessages(ctx, s.ID, 0, 0)
	requireNotFound(t, err, "")
	_, err = st.RecentMessages(ctx, s.ID, 10)
	requireNotFound(t, err, "")
	_, err = st.GetMemory(ctx, s.ID, "k")
	requireNotFound(t, err, "")
	_, err = st.ListMemory(ctx, s.ID)
	requireNotFound(t, err, "")
	_, err = st.ReadEvents(ctx, s.ID, 0, 0)
	requireNotFound(t, err, "")
	byState, err := st.ListRunsByState(ctx, session.RunRunning)
	require.NoError(t, err)
	assert.Empty(t, byState, "runs of a deleted session")

	// Nor can anything be written to it any more.
	// The lease went with the session, and the session is not found
	// before the token is checked.
	token := mustToken(t, st, s.ID)
	requireNotFound(t, st.AppendEvents(ctx, token, newEvents(s.ID, 3, 1)), "")
	requireNotFound(t, st.AppendMessages(ctx, token, newMessage(s.ID, "late")), "")
	requireNotFound(t, st.PutMemory(ctx, newEntry(s.ID, "late", `1`), noLimit), "")
	requireNotFound(t, st.CreateRun(ctx, newRun(s.ID), session.RunConstraints{}), "")
	requireNotFound(t, st.UpdateSession(ctx, s), "")
	_, err = st.AcquireLease(ctx, s.ID, "replica-a", time.Minute)
	requireNotFound(t, err, "")
	requireNotFound(t, st.DeleteSession(ctx, s.ID), "session_not_found")
}

func testDeleteLeavesOthers(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	parent := mustCreateSession(t, st)
	child := mustCreateSession(t, st, childOf(parent))
	other := mustCreateSession(t, st)
	populate(t, st, parent.ID)
	childRun, otherRun := populate(t, st, child.ID), populate(t, st, other.ID)
	require.NoError(t, st.DeleteSession(ctx, parent.ID))

	requireIntact(t, st, child, childRun)
	requireIntact(t, st, other, otherRun)
	children, err := st.ListSessions(ctx, kernel.SessionQuery{ParentID: parent.ID})
	require.NoError(t, err)
	assert.Equal(t, []string{child.ID}, sessionIDs(children), "children outlive their parent")
	all, err := st.ListSessions(ctx, kernel.SessionQuery{})
	require.NoError(t, err)
	assert.Equal(t, []string{other.ID, child.ID}, sessionIDs(all))
	byState, err := st.ListRunsByState(ctx, session.RunRunning)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{childRun.ID, otherRun.ID}, runIDs(byState))
}

func testDeleteRecreate(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	populate(t, st, s.ID)
	require.NoError(t, st.DeleteSession(ctx, s.ID))
	forgetLease(st, s.ID)
	require.NoError(t, st.CreateSession(ctx, s))

	assert.Zero(t, mustGetSession(t, st, s.ID).LastSeq)
	runs, err := st.ListRuns(ctx, s.ID, session.RunQuery{})
	require.NoError(t, err)
	assert.Empty(t, runs)
	assert.Empty(t, mustListMessages(t, st, s.ID, 0, 0))
	assert.Empty(t, mustListMemory(t, st, s.ID))
	assert.Empty(t, mustReadEvents(t, st, s.ID, 0, 0))
	assert.Equal(t, span(1, 1), seqs(mustAppendEvents(t, st, newEvents(s.ID, 0, 1))))
	mustAppendMessages(t, st, s.ID, 1)
	assert.Equal(t, []int64{1}, positions(mustListMessages(t, st, s.ID, 0, 0)))
}
