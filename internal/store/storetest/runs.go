package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

var runTests = []test{
	{"create and get keep every field", testRunRoundTrip},
	{"create in an unknown session is not found", testRunUnknownSession},
	{"create with a taken id is a conflict", testRunDuplicate},
	{"unknown run is not found", testRunNotFound},
	{"update replaces the run", testRunUpdate},
	{"extension fields survive create and update", testRunExt},
	{"what a continued run records survives every read", testRunContinuation},
	{"list pages newest first", testRunListPaging},
	{"list goes by creation order", testRunListOrder},
	{"list filters by state", testRunListStates},
	{"find by idempotency key", testRunIdempotency},
	{"list by state spans sessions oldest first", testRunsByState},
	{"values never alias the store", testRunAliasing},
}

// newRun returns a queued run of session sessionID, not yet stored, with
// edits applied.
func newRun(sessionID string, edits ...func(*session.Run)) session.Run {
	r := session.Run{
		ID: newID(), SessionID: sessionID, State: session.RunQueued,
		Input: "hello", CreatedAt: at(0),
	}
	for _, edit := range edits {
		edit(&r)
	}
	return r
}

// mustCreateRun stores newRun(sessionID, edits...) and returns it.
func mustCreateRun(tb testing.TB, st kernel.Store, sessionID string, edits ...func(*session.Run)) session.Run {
	tb.Helper()
	r := newRun(sessionID, edits...)
	require.NoError(tb, st.CreateRun(tb.Context(), r, session.RunConstraints{}), "create run")
	return r
}

// mustGetRun returns the stored run.
func mustGetRun(tb testing.TB, st kernel.Store, sessionID, runID string) session.Run {
	tb.Helper()
	r, err := st.GetRun(tb.Context(), sessionID, runID)
	require.NoError(tb, err, "get run %s", runID)
	return r
}

// created returns an edit setting a run's CreatedAt, state and key.
func created(n int, state session.RunState, key string) func(*session.Run) {
	return func(r *session.Run) { r.CreatedAt, r.State, r.IdempotencyKey = at(n), state, key }
}

// runIDs returns the ids of rs in order.
func runIDs(rs []session.Run) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func testRunRoundTrip(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	want := mustCreateRun(t, st, s.ID, func(r *session.Run) {
		r.State, r.Input, r.IdempotencyKey = session.RunFailed, "what is 2+2? ✓", "key-1"
		r.CreatedAt, r.StartedAt, r.EndedAt = at(1), at(2), at(3)
		r.Error = &session.RunError{Code: session.ErrorCodeModel, Message: "rate limited"}
		r.Usage = session.Usage{InputTokens: 1234, OutputTokens: 56}
		r.StartSeq, r.EndSeq = 1, 42
	})
	got := mustGetRun(t, st, s.ID, want.ID)
	assert.Equal(t, normRun(want), normRun(got))
	assert.Zero(t, got.Version, "Version of a new run")
}

func testRunExt(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	want := mustCreateRun(t, st, s.ID, func(r *session.Run) {
		r.State = session.RunWaitingInput
		r.RunExt = session.RunExt{
			IfBusy: "steer", SteeredInto: newID(), CancelRequested: true, Model: "large-2",
			Kind: session.RunKindClear, ClearMemory: true,
			Decisions: []session.Decision{
				{ToolCallID: "call_1", Approve: true, At: at(3)},
				{ToolCallID: "call_2", Approve: false, Reason: "not that file ✗", At: at(4).Add(7 * time.Microsecond)},
			},
			Overrides: &session.Overrides{Model: "large-2", Temperature: float(0.7), MaxTokens: integer(0)},
		}
	})
	got := mustGetRun(t, st, s.ID, want.ID)
	assert.Equal(t, normRun(want), normRun(got))
	require.Len(t, got.Decisions, 2)
	assert.True(t, want.Decisions[1].At.Equal(got.Decisions[1].At), "decision time %v, want %v", got.Decisions[1].At, want.Decisions[1].At)
	require.NotNil(t, got.Overrides.MaxTokens, "a zero max tokens is kept, not dropped")

	// Update replaces them: a decision added, others emptied.
	got.Decisions = append(got.Decisions, session.Decision{ToolCallID: "call_3", Approve: true, At: at(5)})
	got.CancelRequested, got.SteeredInto, got.Overrides = false, "", nil
	require.NoError(t, st.UpdateRun(ctx, got))
	got.Version++
	again := mustGetRun(t, st, s.ID, want.ID)
	assert.Equal(t, normRun(got), normRun(again))
	assert.Nil(t, again.Overrides)

	again.RunExt = session.RunExt{}
	require.NoError(t, st.UpdateRun(ctx, again))
	again.Version++
	assert.Equal(t, normRun(again), normRun(mustGetRun(t, st, s.ID, want.ID)))
}

// testRunContinuation checks the fields a run needs to be continued by
// another process (its resumes, why it was let go, what its recorded
// model calls spent): each read, and an update that clears them, must
// give back what was stored.
func testRunContinuation(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	want := mustCreateRun(t, st, s.ID, func(r *session.Run) {
		r.State, r.StartedAt, r.StartSeq = session.RunRunning, at(1), 3
		r.Usage = session.Usage{InputTokens: 90, OutputTokens: 12}
		r.RunExt = session.RunExt{Resumes: 2, Crashes: 1, Handoff: session.ResumeShutdown, Model: "large-2",
			ModelUsage: []session.ModelUsage{
				{Provider: "openai", Model: "large-2", Usage: session.Usage{InputTokens: 80, OutputTokens: 10}},
				{Provider: "openai", Model: "small-1", Usage: session.Usage{InputTokens: 10, OutputTokens: 2}},
			}}
	})
	assert.Equal(t, normRun(want), normRun(mustGetRun(t, st, s.ID, want.ID)), "get")
	listed, err := st.ListRuns(ctx, s.ID, session.RunQuery{})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, normRun(want), normRun(listed[0]), "list")
	byState, err := st.ListRunsByState(ctx, session.RunRunning)
	require.NoError(t, err)
	i := slices.IndexFunc(byState, func(r session.Run) bool { return r.ID == want.ID })
	require.GreaterOrEqual(t, i, 0, "list by state finds the running run")
	assert.Equal(t, normRun(want), normRun(byState[i]), "list by state")

	// Continued: one more resume, the hand-off cleared, more usage.
	got := mustGetRun(t, st, s.ID, want.ID)
	got.Resumes, got.Handoff = 3, ""
	got.ModelUsage = got.ModelUsage[:1]
	got.ModelUsage[0].OutputTokens = 40
	require.NoError(t, st.UpdateRun(ctx, got))
	got.Version++
	again := mustGetRun(t, st, s.ID, want.ID)
	assert.Equal(t, normRun(got), normRun(again), "after update")
	assert.Empty(t, again.Handoff)
	assert.Equal(t, 1, again.Crashes)
}

func testRunUnknownSession(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	requireNotFound(t, st.CreateRun(ctx, newRun(newID()), session.RunConstraints{}), "session_not_found")
	constrained := session.RunConstraints{IdempotentSince: at(0), MaxQueued: 1}
	requireNotFound(t, st.CreateRun(ctx, newRun(newID(), created(1, session.RunQueued, "k")), constrained), "session_not_found")
}

func testRunDuplicate(t *testing.T, st kernel.Store) {
	s := mustCreateSession(t, st)
	orig := mustCreateRun(t, st, s.ID)
	dup := newRun(s.ID, func(r *session.Run) { r.ID, r.Input = orig.ID, "other" })
	requireErr(t, st.CreateRun(t.Context(), dup, session.RunConstraints{}), errdefs.ErrConflict, "run_exists")
	assert.Equal(t, "hello", mustGetRun(t, st, s.ID, orig.ID).Input, "the original survives")
}

func testRunNotFound(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	r := mustCreateRun(t, st, s.ID)
	_, err := st.GetRun(ctx, s.ID, newID())
	requireNotFound(t, err, "run_not_found")
	_, err = st.GetRun(ctx, other.ID, r.ID)
	requireNotFound(t, err, "run_not_found")
	_, err = st.GetRun(ctx, newID(), r.ID)
	requireNotFound(t, err, "session_not_found")
	requireNotFound(t, st.UpdateRun(ctx, newRun(s.ID)), "run_not_found")
	requireNotFound(t, st.UpdateRun(ctx, newRun(newID())), "session_not_found")
	_, err = st.ListRuns(ctx, newID(), session.RunQuery{})
	requireNotFound(t, err, "session_not_found")
	_, err = st.ListRuns(ctx, newID(), session.RunQuery{States: []session.RunState{session.RunQueued}, Limit: 1})
	requireNotFound(t, err, "session_not_found")
}

func testRunUpdate(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	r := mustCreateRun(t, st, s.ID, created(1, session.RunQueued, "k"))
	require.NoError(t, r.Transition(session.RunRunning, at(2)))
	r.StartSeq = 1
	require.NoError(t, st.UpdateRun(ctx, r))
	r.Version++
	assert.Equal(t, normRun(r), normRun(mustGetRun(t, st, s.ID, r.ID)))

	require.NoError(t, r.Transition(session.RunFailed, at(3)))
	r.Error = &session.RunError{Code: session.ErrorCodeTimeout, Message: "run timed out"}
	r.Usage, r.EndSeq = session.Usage{InputTokens: 10, OutputTokens: 20}, 7
	require.NoError(t, st.UpdateRun(ctx, r))
	r.Version++
	assert.Equal(t, normRun(r), normRun(mustGetRun(t, st, s.ID, r.ID)))

	r.Error = nil // replace, not merge
	require.NoError(t, st.UpdateRun(ctx, r))
	assert.Nil(t, mustGetRun(t, st, s.ID, r.ID).Error)
}

func testRunListPaging(t *testing.T, st kernel.Store) {
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	var want, otherRuns []session.Run // newest first
	for i := range 5 {
		want = append([]session.Run{mustCreateRun(t, st, s.ID, created(i, session.RunSucceeded, ""))}, want...)
		otherRuns = append(otherRuns, mustCreateRun(t, st, other.ID))
	}
	tests := []struct {
		name   string
		before string
		limit  int
		want   []session.Run
	}{
		{"all", "", 0, want},
		{"first page", "", 2, want[:2]},
		{"second page", want[1].ID, 2, want[2:4]},
		{"last page", want[3].ID, 2, want[4:]},
		{"before the oldest", want[4].ID, 0, nil},
		{"limit above count", "", 50, want},
		{"before an unknown run", newID(), 0, nil},
		{"before a run of another session", otherRuns[0].ID, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.ListRuns(t.Context(), s.ID, session.RunQuery{Before: tt.before, Limit: tt.limit})
			require.NoError(t, err)
			assert.Equal(t, runIDs(tt.want), runIDs(got))
			assert.Equal(t, normAll(tt.want, normRun), normAll(got, normRun))
		})
	}
}

func testRunListOrder(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	// Ids chosen against the order of creation, and CreatedAt going back:
	// neither decides the listing, the order of CreateRun calls does.
	var want []session.Run // newest first
	for i, id := range []string{"run-e", "run-a", "run-d", "run-b", "run-c"} {
		r := mustCreateRun(t, st, s.ID, created(10-i, session.RunSucceeded, ""), func(r *session.Run) { r.ID = id })
		want = append([]session.Run{r}, want...)
	}
	list := func(q session.RunQuery) []string {
		t.Helper()
		got, err := st.ListRuns(ctx, s.ID, q)
		require.NoError(t, err)
		return runIDs(got)
	}
	assert.Equal(t, runIDs(want), list(session.RunQuery{}))
	assert.Equal(t, runIDs(want[1:3]), list(session.RunQuery{Before: want[0].ID, Limit: 2}))
	assert.Equal(t, runIDs(want[3:]), list(session.RunQuery{Before: want[2].ID}))

	// Updates keep a run's place, whatever they change.
	r := want[3]
	r.CreatedAt, r.State = at(99), session.RunSucceeded
	require.NoError(t, st.UpdateRun(ctx, r))
	assert.Equal(t, runIDs(want), list(session.RunQuery{}))
}

func testRunListStates(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	// Oldest first, in one session, one run of each state but two queued.
	states := []session.RunState{session.RunSucceeded, session.RunQueued, session.RunFailed, session.RunRunning,
		session.RunQueued, session.RunCancelled, session.RunSteered, session.RunWaitingInput, session.RunInterrupted}
	runs := make([]session.Run, len(states))
	for i, state := range states {
		runs[i] = mustCreateRun(t, st, s.ID, created(i, state, ""))
		mustCreateRun(t, st, other.ID, created(i, state, ""))
	}
	ids := func(idx ...int) []string {
		out := []string{}
		for _, i := range idx {
			out = append(out, runs[i].ID)
		}
		return out
	}
	busy := []session.RunState{session.RunQueued, session.RunRunning, session.RunWaitingInput}
	tests := []struct {
		name string
		q    session.RunQuery
		want []string
	}{
		{"one state", session.RunQuery{States: []session.RunState{session.RunQueued}}, ids(4, 1)},
		{"several states", session.RunQuery{States: busy}, ids(7, 4, 3, 1)},
		{"the newest busy run", session.RunQuery{States: busy, Limit: 1}, ids(7)},
		{"the oldest queued run", session.RunQuery{States: []session.RunState{session.RunQueued}, Before: runs[4].ID, Limit: 1}, ids(1)},
		{"states and before", session.RunQuery{States: busy, Before: runs[4].ID}, ids(3, 1)},
		{"before a run of another state", session.RunQuery{States: busy, Before: runs[6].ID, Limit: 2}, ids(4, 3)},
		{"steered", session.RunQuery{States: []session.RunState{session.RunSteered}}, ids(6)},
		{"terminal", session.RunQuery{States: []session.RunState{session.RunSucceeded, session.RunFailed,
			session.RunCancelled, session.RunInterrupted}}, ids(8, 5, 2, 0)},
		{"a state no run is in", session.RunQuery{States: []session.RunState{"nonexistent"}}, ids()},
		{"no states means all", session.RunQuery{States: []session.RunState{}, Limit: 3}, ids(8, 7, 6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.ListRuns(ctx, s.ID, tt.q)
			require.NoError(t, err)
			assert.Equal(t, tt.want, runIDs(got))
			for _, r := range got {
				assert.Equal(t, s.ID, r.SessionID)
			}
		})
	}
	t.Run("an update moves a run between states", func(t *testing.T) {
		r := runs[1]
		require.NoError(t, r.Transition(session.RunRunning, at(20)))
		require.NoError(t, st.UpdateRun(ctx, r))
		got, err := st.ListRuns(ctx, s.ID, session.RunQuery{States: []session.RunState{session.RunQueued}})
		require.NoError(t, err)
		assert.Equal(t, ids(4), runIDs(got))
		got, err = st.ListRuns(ctx, s.ID, session.RunQuery{States: []session.RunState{session.RunRunning}})
		require.NoError(t, err)
		assert.Equal(t, ids(3, 1), runIDs(got), "the run keeps its place in creation order")
	})
}

func testRunIdempotency(t *testing.T, st kernel.Store) {
	s, other := mustCreateSession(t, st), mustCreateSession(t, st)
	mustCreateRun(t, st, s.ID, created(10, session.RunSucceeded, "k"))
	newer := mustCreateRun(t, st, s.ID, created(20, session.RunRunning, "k"))
	mustCreateRun(t, st, s.ID, created(30, session.RunQueued, "other"))
	mustCreateRun(t, st, s.ID, created(40, session.RunQueued, ""))
	otherRun := mustCreateRun(t, st, other.ID, created(50, session.RunQueued, "k"))

	tests := []struct {
		name      string
		sessionID string
		key       string
		since     time.Time
		want      *session.Run // nil: not found
	}{
		{"newest match of the session wins", s.ID, "k", at(0), &newer},
		{"since at creation matches", s.ID, "k", at(20), &newer},
		{"since excludes older runs", s.ID, "k", at(21), nil},
		{"since at the older run still picks the newest", s.ID, "k", at(10), &newer},
		{"unknown key", s.ID, "nope", at(0), nil},
		{"key of another session", other.ID, "other", at(0), nil},
		{"same key in another session", other.ID, "k", at(0), &otherRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.FindRunByIdempotencyKey(t.Context(), tt.sessionID, tt.key, tt.since)
			if tt.want == nil {
				requireNotFound(t, err, "run_not_found")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, normRun(*tt.want), normRun(got))
		})
	}
	t.Run("unknown session", func(t *testing.T) {
		_, err := st.FindRunByIdempotencyKey(t.Context(), newID(), "k", at(0))
		requireNotFound(t, err, "session_not_found")
	})
}

func testRunsByState(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	a1 := mustCreateRun(t, st, a.ID, created(1, session.RunQueued, ""))
	b1 := mustCreateRun(t, st, b.ID, created(2, session.RunRunning, ""))
	a2 := mustCreateRun(t, st, a.ID, created(3, session.RunRunning, ""))
	b2 := mustCreateRun(t, st, b.ID, created(4, session.RunSucceeded, ""))
	a3 := mustCreateRun(t, st, a.ID, created(5, session.RunWaitingInput, ""))

	list := func(states ...session.RunState) []session.Run {
		t.Helper()
		got, err := st.ListRunsByState(ctx, states...)
		require.NoError(t, err)
		return normAll(got, normRun)
	}
	assert.Equal(t, normAll([]session.Run{a1, b1, a2}, normRun), list(session.RunRunning, session.RunQueued))
	assert.Equal(t, normAll([]session.Run{a3}, normRun), list(session.RunWaitingInput))
	assert.Equal(t, normAll([]session.Run{b2}, normRun), list(session.RunSucceeded))
	assert.Empty(t, list(session.RunFailed))
	assert.Empty(t, list())

	require.NoError(t, a1.Transition(session.RunRunning, at(6)))
	require.NoError(t, st.UpdateRun(ctx, a1))
	assert.Equal(t, []string{a1.ID, b1.ID, a2.ID}, runIDs(list(session.RunRunning)), "an update keeps creation order")
}

func testRunAliasing(t *testing.T, st kernel.Store) {
	ctx := t.Context()
	s := mustCreateSession(t, st)
	r := newRun(s.ID, created(1, session.RunFailed, ""))
	r.Error = &session.RunError{Code: session.ErrorCodeInternal, Message: "boom"}
	require.NoError(t, st.CreateRun(ctx, r, session.RunConstraints{}))
	r.Error.Message = "changed after create"

	got := mustGetRun(t, st, s.ID, r.ID)
	got.Error.Message = "changed after get"
	listed, err := st.ListRuns(ctx, s.ID, session.RunQuery{})
	require.NoError(t, err)
	listed[0].Error.Message = "changed after list"
	byState, err := st.ListRunsByState(ctx, session.RunFailed)
	require.NoError(t, err)
	byState[0].Error.Message = "changed after list by state"
	assert.Equal(t, "boom", mustGetRun(t, st, s.ID, r.ID).Error.Message)

	upd := mustGetRun(t, st, s.ID, r.ID)
	upd.Error = &session.RunError{Code: session.ErrorCodeInternal, Message: "updated"}
	upd.Decisions = []session.Decision{{ToolCallID: "c1", Approve: true, At: at(2)}}
	upd.Overrides = &session.Overrides{Model: "m", Temperature: float(1)}
	require.NoError(t, st.UpdateRun(ctx, upd))
	upd.Error.Message = "changed after update"
	upd.Decisions[0].ToolCallID = "changed after update"
	*upd.Overrides.Temperature = 2
	got = mustGetRun(t, st, s.ID, r.ID)
	assert.Equal(t, "updated", got.Error.Message)
	assert.Equal(t, "c1", got.Decisions[0].ToolCallID)
	assert.InDelta(t, 1.0, *got.Overrides.Temperature, 0)

	got.Decisions[0].ToolCallID = "changed after get"
	*got.Overrides.Temperature = 3
	again := mustGetRun(t, st, s.ID, r.ID)
	assert.Equal(t, "c1", again.Decisions[0].ToolCallID)
	assert.InDelta(t, 1.0, *again.Overrides.Temperature, 0)
}
