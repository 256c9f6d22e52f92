package session_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

var (
	allStates = []session.State{
		session.StateActive, session.StateRunning, session.StateWaitingInput,
		session.StateCompleted, session.StateError, session.StateClosed,
	}
	allRunStates = []session.RunState{
		session.RunQueued, session.RunRunning, session.RunWaitingInput,
		session.RunSucceeded, session.RunFailed, session.RunCancelled, session.RunInterrupted, session.RunSteered,
	}
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// sessionMoves are the session transitions DESIGN.md §2 allows; every
// other pair of states is refused. running → running lets a session that
// still says running (its run ended without recording it) take a new run.
var sessionMoves = map[session.State][]session.State{
	session.StateActive:       {session.StateRunning, session.StateClosed},
	session.StateRunning:      {session.StateRunning, session.StateWaitingInput, session.StateCompleted, session.StateError, session.StateClosed},
	session.StateWaitingInput: {session.StateRunning, session.StateCompleted, session.StateError, session.StateClosed},
	session.StateCompleted:    {session.StateRunning, session.StateClosed},
	session.StateError:        {session.StateRunning, session.StateClosed},
	session.StateClosed:       nil,
}

func TestState_CanBecome(t *testing.T) {
	for _, from := range allStates {
		for _, to := range allStates {
			want := slices.Contains(sessionMoves[from], to)
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				if got := from.CanBecome(to); got != want {
					t.Errorf("%s.CanBecome(%s) = %v, want %v", from, to, got, want)
				}
			})
		}
	}
	t.Run("unknown states", func(t *testing.T) {
		for _, s := range allStates {
			assert.False(t, s.CanBecome("sleeping"), "%s to sleeping", s)
			if s != session.StateClosed {
				assert.False(t, session.State("sleeping").CanBecome(s), "sleeping to %s", s)
			}
		}
	})
}

func TestState_Valid(t *testing.T) {
	for _, s := range allStates {
		assert.True(t, s.Valid(), "%s", s)
	}
	for _, s := range []session.State{"", "sleeping", "Active", "queued"} {
		assert.False(t, s.Valid(), "%q", s)
	}
}

func TestState_AcceptsRuns(t *testing.T) {
	tests := []struct {
		state session.State
		want  bool
	}{
		{session.StateActive, true},
		{session.StateRunning, true},
		{session.StateWaitingInput, true},
		{session.StateCompleted, true},
		{session.StateError, true},
		{session.StateClosed, false},
	}
	for _, tt := range tests {
		if got := tt.state.AcceptsRuns(); got != tt.want {
			t.Errorf("%s.AcceptsRuns() = %v, want %v", tt.state, got, tt.want)
		}
	}
}

func TestSession_Transition(t *testing.T) {
	for _, from := range allStates {
		for _, to := range allStates {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				s := session.Session{ID: "s1", State: from, UpdatedAt: t0}
				err := s.Transition(to, t0.Add(time.Minute))
				if slices.Contains(sessionMoves[from], to) {
					require.NoError(t, err)
					assert.Equal(t, to, s.State)
					assert.Equal(t, t0.Add(time.Minute), s.UpdatedAt)
					return
				}
				want := "invalid_transition"
				if from == session.StateClosed {
					want = "session_closed"
				}
				require.ErrorIs(t, err, errdefs.ErrConflict)
				assert.Equal(t, want, string(errdefs.CodeOf(err)))
				assert.Equal(t, from, s.State, "a refused transition changes nothing")
				assert.Equal(t, t0, s.UpdatedAt)
			})
		}
	}
}

func TestSession_Clone(t *testing.T) {
	s := session.Session{ID: "s1", Metadata: map[string]string{"a": "1"}}
	c := s.Clone()
	c.Metadata["a"] = "2"
	assert.Equal(t, "1", s.Metadata["a"])
	assert.Nil(t, session.Session{}.Clone().Metadata)
}

// runMoves are the run transitions DESIGN.md §2 allows, with those of a
// queued run that never starts: steered into the active run, or failed.
var runMoves = map[session.RunState][]session.RunState{
	session.RunQueued:       {session.RunRunning, session.RunCancelled, session.RunSteered, session.RunFailed},
	session.RunRunning:      {session.RunWaitingInput, session.RunSucceeded, session.RunFailed, session.RunCancelled, session.RunInterrupted},
	session.RunWaitingInput: {session.RunRunning, session.RunFailed, session.RunCancelled, session.RunInterrupted},
}

func TestQuery_Matches(t *testing.T) {
	s := session.Session{ID: "s1", Tenant: "acme", Agent: "helper", State: session.StateRunning,
		ParentID: "p", ForkedFrom: "f", Metadata: map[string]string{"user": "alice", "team": "core"},
		CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}
	tests := []struct {
		name string
		q    session.Query
		want bool
	}{
		{"no filter", session.Query{}, true},
		{"every field", session.Query{Tenant: "acme", Agent: "helper", State: session.StateRunning,
			ParentID: "p", ForkedFrom: "f", Metadata: map[string]string{"user": "alice"}}, true},
		{"other tenant", session.Query{Tenant: "other"}, false},
		{"other agent", session.Query{Agent: "coder"}, false},
		{"other state", session.Query{State: session.StateClosed}, false},
		{"other parent", session.Query{ParentID: "q"}, false},
		{"other fork origin", session.Query{ForkedFrom: "g"}, false},
		{"every metadata entry", session.Query{Metadata: map[string]string{"user": "alice", "team": "core"}}, true},
		{"one metadata entry differs", session.Query{Metadata: map[string]string{"user": "alice", "team": "web"}}, false},
		{"metadata key missing", session.Query{Metadata: map[string]string{"role": ""}}, false},
		{"created after, exclusive", session.Query{CreatedAfter: t0}, false},
		{"created after", session.Query{CreatedAfter: t0.Add(-time.Nanosecond)}, true},
		{"created before, exclusive", session.Query{CreatedBefore: t0}, false},
		{"created before", session.Query{CreatedBefore: t0.Add(time.Nanosecond)}, true},
		{"expires before, exclusive", session.Query{ExpiresBefore: t0.Add(time.Hour)}, false},
		{"expires before", session.Query{ExpiresBefore: t0.Add(2 * time.Hour)}, true},
		{"updated before, exclusive", session.Query{UpdatedBefore: t0.Add(time.Minute)}, false},
		{"updated before", session.Query{UpdatedBefore: t0.Add(2 * time.Minute)}, true},
		{"after and limit are not filters", session.Query{After: &session.Cursor{CreatedAt: t0, ID: "a"}, Limit: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.q.Matches(&s))
		})
	}
	never := s
	never.ExpiresAt = time.Time{}
	q := session.Query{ExpiresBefore: t0.Add(100 * time.Hour)}
	assert.False(t, q.Matches(&never), "a session that never expires is never due")
}

func TestRunState_CanBecome(t *testing.T) {
	for _, from := range allRunStates {
		for _, to := range allRunStates {
			want := slices.Contains(runMoves[from], to)
			if got := from.CanBecome(to); got != want {
				t.Errorf("%s.CanBecome(%s) = %v, want %v", from, to, got, want)
			}
		}
		assert.False(t, from.CanBecome("paused"), "%s to paused", from)
	}
}

func TestRunState_Terminal(t *testing.T) {
	tests := []struct {
		state session.RunState
		want  bool
	}{
		{session.RunQueued, false},
		{session.RunRunning, false},
		{session.RunWaitingInput, false},
		{session.RunSucceeded, true},
		{session.RunFailed, true},
		{session.RunCancelled, true},
		{session.RunInterrupted, true},
		{session.RunSteered, true},
		{"", false},
		{"paused", false},
	}
	for _, tt := range tests {
		if got := tt.state.Terminal(); got != tt.want {
			t.Errorf("%q.Terminal() = %v, want %v", tt.state, got, tt.want)
		}
		if got, want := tt.state.Valid(), tt.state != "" && tt.state != "paused"; got != want {
			t.Errorf("%q.Valid() = %v, want %v", tt.state, got, want)
		}
	}
}

func TestRun_Transition(t *testing.T) {
	later := t0.Add(time.Minute)
	for _, from := range allRunStates {
		for _, to := range allRunStates {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				r := session.Run{ID: "r1", State: from}
				if from != session.RunQueued {
					r.StartedAt = t0
				}
				before := r
				err := r.Transition(to, later)
				if !slices.Contains(runMoves[from], to) {
					require.ErrorIs(t, err, errdefs.ErrConflict)
					assert.Equal(t, "invalid_transition", string(errdefs.CodeOf(err)))
					assert.Equal(t, before, r, "a refused transition changes nothing")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, to, r.State)
				wantStarted := t0
				if from == session.RunQueued && to == session.RunRunning {
					wantStarted = later
				} else if from == session.RunQueued {
					wantStarted = time.Time{}
				}
				assert.Equal(t, wantStarted, r.StartedAt, "StartedAt")
				if to.Terminal() {
					assert.Equal(t, later, r.EndedAt, "EndedAt")
				} else {
					assert.True(t, r.EndedAt.IsZero(), "EndedAt")
				}
			})
		}
	}
}

func TestUsage_Add(t *testing.T) {
	got := session.Usage{InputTokens: 1, OutputTokens: 2}.Add(session.Usage{InputTokens: 10, OutputTokens: 20})
	assert.Equal(t, session.Usage{InputTokens: 11, OutputTokens: 22}, got)
}
