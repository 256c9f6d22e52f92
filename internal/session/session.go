// Package session holds kerneld's domain types and their rules: Session,
// Run, Message and Event, the session and run state machines, and the
// AG-UI event vocabulary with its wire encoding.
//
// It is pure: no I/O, no logging, no HTTP. The kernel decides when things
// happen; this package decides what is allowed to happen.
package session

import (
	"maps"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// State is where a session is in its life.
type State string

// Session states. Completed and Error describe the last run; both accept
// new runs. Closed is terminal: no new runs, history readable until deleted.
const (
	StateActive       State = "active"
	StateRunning      State = "running"
	StateWaitingInput State = "waiting_input"
	StateCompleted    State = "completed"
	StateError        State = "error"
	StateClosed       State = "closed"
)

// sessionTransitions lists, for each state, the states it may move to.
// Every state but closed may also move to closed (see CanBecome).
var sessionTransitions = map[State][]State{
	StateActive:       {StateRunning},
	StateRunning:      {StateWaitingInput, StateCompleted, StateError, StateRunning},
	StateWaitingInput: {StateRunning, StateCompleted, StateError},
	StateCompleted:    {StateRunning},
	StateError:        {StateRunning},
}

// Valid reports whether s is a known session state.
func (s State) Valid() bool {
	_, ok := sessionTransitions[s]
	return ok || s == StateClosed
}

// CanBecome reports whether a session in state s may move to state to.
func (s State) CanBecome(to State) bool {
	if to == StateClosed {
		return s != StateClosed
	}
	for _, next := range sessionTransitions[s] {
		if next == to {
			return true
		}
	}
	return false
}

// AcceptsRuns reports whether a session in state s may start a new run.
func (s State) AcceptsRuns() bool { return s.CanBecome(StateRunning) }

// Session is one conversation with one agent.
type Session struct {
	ID          string
	Tenant      string // from auth; never settable by a client
	Agent       string
	Name        string
	Metadata    map[string]string
	State       State
	ParentID    string
	RootID      string
	Depth       int
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastSeq     int64  // seq of the newest event in the session's log
	ActiveRunID string // the run in progress, if any
	// TTL, when set, is how long the session may sit idle: ExpiresAt moves
	// to TTL after every run start, and retention closes it once passed.
	TTL       time.Duration
	ExpiresAt time.Time
	// InheritMemory says how a child session got its memory: "none" or
	// "copy" (of its parent's at creation); "" for a root session.
	InheritMemory string
	// Version is for optimistic concurrency between replicas: a versioned
	// update succeeds only while the stored Version equals the one it
	// carries, and stores Version+1 (see ErrStale).
	Version int64
}

// Transition moves s to state to at time now, or reports why it cannot.
func (s *Session) Transition(to State, now time.Time) error {
	if !s.State.CanBecome(to) {
		if s.State == StateClosed {
			return errdefs.New(errdefs.ErrConflict, "session_closed", "session %s is closed", s.ID)
		}
		return errdefs.New(errdefs.ErrConflict, "invalid_transition",
			"session %s cannot go from %s to %s", s.ID, s.State, to)
	}
	s.State = to
	s.UpdatedAt = now
	return nil
}

// Clone returns a copy of s that shares no maps with it.
func (s Session) Clone() Session {
	s.Metadata = maps.Clone(s.Metadata)
	return s
}

// Query selects sessions in a listing. Empty fields match all.
type Query struct {
	Tenant   string
	Agent    string
	State    State
	ParentID string
	// Before is a session id: only sessions with a smaller id are listed.
	// Ids are UUIDv7, so this pages from newest to oldest.
	Before string
	Limit  int // at most this many; 0 means no limit
	// ExpiresBefore, when set, selects sessions whose ExpiresAt is set
	// and earlier than it (retention closes them).
	ExpiresBefore time.Time
	// UpdatedBefore, when set, selects sessions last updated before it
	// (retention deletes closed sessions some time after closing them).
	UpdatedBefore time.Time
}

// Matches reports whether s passes q's filters, Before and Limit aside:
// Tenant, Agent, State and ParentID when set, and the retention bounds
// (a session that never expires fails ExpiresBefore). Stores that cannot
// filter inside their query language filter with it.
func (q *Query) Matches(s *Session) bool {
	if (q.Tenant != "" && s.Tenant != q.Tenant) ||
		(q.Agent != "" && s.Agent != q.Agent) ||
		(q.State != "" && s.State != q.State) ||
		(q.ParentID != "" && s.ParentID != q.ParentID) {
		return false
	}
	if !q.ExpiresBefore.IsZero() && (s.ExpiresAt.IsZero() || !s.ExpiresAt.Before(q.ExpiresBefore)) {
		return false
	}
	return q.UpdatedBefore.IsZero() || s.UpdatedAt.Before(q.UpdatedBefore)
}
