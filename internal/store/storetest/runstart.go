package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var startTests = []test{
	{"start creates the run and writes the rest with it", testStartCreates},
	{"start moves a queued run", testStartMovesQueued},
	{"a stale session writes nothing", testStartStaleSession},
	{"a stale run writes nothing", testStartStaleRun},
	{"a lost lease writes nothing", testStartFenced},
	{"a taken idempotency key writes nothing", testStartDuplicate},
}

// newStart returns the start of run r, running, on session s as read:
// the session running it, RUN_STARTED and the echoed input, and the input
// in the history.
func newStart(s session.Session, r session.Run, create bool) *session.RunStart {
	r.State, r.StartedAt = session.RunRunning, at(1)
	s.State, s.ActiveRunID, s.UpdatedAt = session.StateRunning, r.ID, at(1)
	evs := []session.Event{session.RunStarted(s.ID, r.ID),
		session.TextMessageStart("in-1", session.RoleUser),
		session.TextMessageContent("in-1", r.Input),
		session.TextMessageEnd("in-1")}
	for i := range evs {
		evs[i].SessionID, evs[i].RunID, evs[i].Time = s.ID, r.ID, at(1)
	}
	msg := session.Message{ID: "in-1", SessionID: s.ID, RunID: r.ID, Role: session.RoleUser, Content: r.Input, CreatedAt: at(1)}
	return &session.RunStart{Run: r, Create: create, Session: s, Events: evs, Messages: []session.Message{msg}}
}

// sessionWithLog returns a stored session with a log and a history
// already, as read back, so a start does not begin at seq 1.
func sessionWithLog(t *testing.T, st kernel.Store) session.Session {
	s := mustCreateSession(t, st)
	require.NoError(t, appendEvents(t.Context(), st, newEvents(s.ID, 1, 3)))
	require.NoError(t, appendMessages(t.Context(), st, newMessage(s.ID, "before")))
	return mustGetSession(t, st, s.ID)
}

func testStartCreates(t *testing.T, st kernel.Store) {
	s := sessionWithLog(t, st)
	start := newStart(s, newRun(s.ID), true)
	require.NoError(t, st.StartRun(t.Context(), mustToken(t, st, s.ID), start))
	checkStarted(t, st, s, start, start.Run.Version)
}

func testStartMovesQueued(t *testing.T, st kernel.Store) {
	s := sessionWithLog(t, st)
	r := mustCreateRun(t, st, s.ID)
	start := newStart(s, mustGetRun(t, st, s.ID, r.ID), false)
	require.NoError(t, st.StartRun(t.Context(), mustToken(t, st, s.ID), start))
	checkStarted(t, st, s, start, start.Run.Version+1)
}

// checkStarted checks that start, of session s as read before, is stored
// whole, its run at version runVersion.
func checkStarted(t *testing.T, st kernel.Store, s session.Session, start *session.RunStart, runVersion int64) {
	for i, ev := range start.Events {
		assert.Equal(t, s.LastSeq+1+int64(i), ev.Seq, "seq of event %d", i)
	}
	assert.Equal(t, int64(2), start.Messages[0].Position)
	run := mustGetRun(t, st, s.ID, start.Run.ID)
	assert.Equal(t, session.RunRunning, run.State)
	assert.Equal(t, s.LastSeq+1, run.StartSeq, "the run's start seq")
	assert.Equal(t, runVersion, run.Version)
	got := mustGetSession(t, st, s.ID)
	assert.Equal(t, session.StateRunning, got.State)
	assert.Equal(t, start.Run.ID, got.ActiveRunID)
	assert.Equal(t, s.Version+1, got.Version)
	assert.Equal(t, s.LastSeq+int64(len(start.Events)), got.LastSeq)
	evs, err := st.ReadEvents(t.Context(), s.ID, s.LastSeq, 0)
	require.NoError(t, err)
	assert.Equal(t, normAll(start.Events, normEvent), normAll(evs, normEvent))
	msgs := mustListMessages(t, st, s.ID, 1, 0)
	require.Len(t, msgs, 1)
	assert.Equal(t, normMessage(start.Messages[0]), normMessage(msgs[0]))
}

// requireNothingStarted checks that session s, as read before a start
// that failed, is as it was: no new run, event or message.
func requireNothingStarted(t *testing.T, st kernel.Store, s session.Session, runs int) {
	got := mustGetSession(t, st, s.ID)
	assert.Equal(t, s.LastSeq, got.LastSeq, "events were appended")
	assert.Equal(t, s.State, got.State)
	assert.Empty(t, got.ActiveRunID)
	all, err := st.ListRuns(t.Context(), s.ID, session.RunQuery{})
	require.NoError(t, err)
	assert.Len(t, all, runs)
	for _, r := range all {
		assert.NotEqual(t, session.RunRunning, r.State, "run %s", r.ID)
	}
	assert.Len(t, mustListMessages(t, st, s.ID, 0, 0), 1, "messages were appended")
}

func testStartStaleSession(t *testing.T, st kernel.Store) {
	s := sessionWithLog(t, st)
	stale := s
	s.Name = "renamed"
	require.NoError(t, st.UpdateSession(t.Context(), s))
	s = mustGetSession(t, st, s.ID)
	err := st.StartRun(t.Context(), mustToken(t, st, s.ID), newStart(stale, newRun(s.ID), true))
	require.ErrorIs(t, err, session.ErrStale)
	requireNothingStarted(t, st, s, 0)
}

func testStartStaleRun(t *testing.T, st kernel.Store) {
	s := sessionWithLog(t, st)
	r := mustCreateRun(t, st, s.ID)
	moved := r
	moved.CancelRequested = true
	require.NoError(t, st.UpdateRun(t.Context(), moved))
	err := st.StartRun(t.Context(), mustToken(t, st, s.ID), newStart(s, r, false))
	require.ErrorIs(t, err, session.ErrStale)
	requireNothingStarted(t, st, s, 1)
}

func testStartFenced(t *testing.T, st kernel.Store) {
	s := sessionWithLog(t, st)
	token := mustToken(t, st, s.ID)
	err := st.StartRun(t.Context(), token+1, newStart(s, newRun(s.ID), true))
	requireFenced(t, err)
	requireNothingStarted(t, st, s, 0)
}

func testStartDuplicate(t *testing.T, st kernel.Store) {
	s := sessionWithLog(t, st)
	first := mustCreateRun(t, st, s.ID, func(r *session.Run) { r.IdempotencyKey, r.State = "k1", session.RunSucceeded })
	r := newRun(s.ID, func(r *session.Run) { r.IdempotencyKey = "k1" })
	start := newStart(s, r, true)
	start.Constraints = session.RunConstraints{IdempotentSince: at(-10)}
	err := st.StartRun(t.Context(), mustToken(t, st, s.ID), start)
	require.ErrorIs(t, err, errdefs.ErrConflict)
	dup, ok := errors.AsType[*session.DuplicateRunError](err)
	require.True(t, ok, "want a DuplicateRunError, got %v", err)
	assert.Equal(t, first.ID, dup.Run.ID)
	requireNothingStarted(t, st, s, 1)
}
