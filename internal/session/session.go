// Package session holds kerneld's domain types and their rules: Session,
// Run, Message and Event, the session and run state machines, and the
// AG-UI event vocabulary with its wire encoding.
//
// It is pure: no I/O, no logging, no HTTP. The kernel decides when things
// happen; this package decides what is allowed to happen.
package session

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
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
	// ForkedFrom is the session this one was forked from, if any.
	ForkedFrom string
	// Version counts the updates of the record: a store updates it only
	// from the version it was read at (see ErrStale), so two writers,
	// possibly on two replicas, cannot silently undo each other's change.
	Version int64

	SessionExt
}

// SessionExt holds the session's fields that no query selects by: a store
// keeps them as one JSON document, so adding one needs no migration.
type SessionExt struct {
	// ForkPosition is the position of the last message copied from
	// ForkedFrom.
	ForkPosition int64 `json:"fork_position,omitempty"`
	// ClosedReason says why the session was closed, when a client said.
	ClosedReason string `json:"closed_reason,omitempty"`
	// AgentState is the session's AG-UI state, a JSON value.
	AgentState json.RawMessage `json:"agent_state,omitempty"`
	// Instructions are the session's own, added to its agent's system
	// prompt for every model call.
	Instructions string `json:"instructions,omitempty"`
	// StateUnsent says a client wrote AgentState over REST since the
	// session's last run started: the next run logs it as STATE_SNAPSHOT.
	StateUnsent bool `json:"state_unsent,omitempty"`
	// Overrides are the model settings chosen for the session's runs.
	Overrides *Overrides `json:"overrides,omitempty"`
	// Model is the model the session's latest run used: the next run that
	// uses another logs kerneld.model.changed.
	Model string `json:"model,omitempty"`
	// Compaction is the session's latest compaction: from then on the
	// model sees its summary and the messages from its FirstKept on.
	Compaction *Compaction `json:"compaction,omitempty"`
	// ClearedAt is the position of the history's latest clear entry: a
	// listing of the history, or a snapshot of it, starts there.
	ClearedAt int64 `json:"cleared_at,omitempty"`
	// Title is what a list shows for the session: set by a client, or
	// generated after its first run (TitleSource says which).
	Title       string      `json:"title,omitempty"`
	TitleSource TitleSource `json:"title_source,omitempty"`
	// TitleLogged says kerneld.session.titled for a generated Title is in
	// the log: one generated after its run ended is logged by the next.
	TitleLogged bool `json:"title_logged,omitempty"`
	// ReadCursors hold, per reader, the seq up to which the reader has
	// read the session's log (see Unread).
	ReadCursors map[string]int64 `json:"read_cursors,omitempty"`
	// Replies are the seqs at which the session's latest assistant
	// messages (MaxReplies of them) were logged, oldest first: a reader's
	// unread count is how many lie past its cursor.
	Replies []int64 `json:"replies,omitempty"`
	// Webhooks are receivers the client named at creation for this
	// session's events, beside the operator's and the agent's.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// RequestHash fingerprints the request that created the session under
	// an Idempotency-Key, so that the key sent again with another body is
	// refused rather than answered with this session.
	RequestHash string `json:"request_hash,omitempty"`
	// PermissionMode says how the session's calls that need approval get
	// it: "ask" when empty; see agents.PermissionModes.
	PermissionMode string `json:"permission_mode,omitempty"`
	// Grants are the standing approvals given with the decision "always".
	Grants []Grant `json:"grants,omitempty"`
	// Imported marks a session that kerneld import wrote (see
	// internal/transfer); nil for one created here.
	Imported *ImportMark `json:"imported,omitempty"`
	// MCPServers are the MCP servers a client attached to the session.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// SpawnKey names the spawn_agent call that created this child session
	// (its parent's run and the call's id), so that a continued run that
	// makes the call again finds this child rather than start another.
	SpawnKey string `json:"spawn_key,omitempty"`
	// Agents are the other agents that may take turns on this session's
	// conversation (POST /sessions/{id}/run with agent), within what the
	// agents' own files allow.
	Agents []string `json:"agents,omitempty"`
}

// Webhook is a receiver of a session's events: its URL and the event
// types it wants (see internal/webhook).
type Webhook struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// ImportMark says which dump a session was imported from and whether all
// of it is in: an import that stops part-way leaves Done unset, so that
// running it again continues the session instead of refusing it.
type ImportMark struct {
	Dump string `json:"dump"`
	Done bool   `json:"done,omitempty"`
}

// Overrides are model settings a client chose within what the agent
// allows. Empty fields keep the agent's own.
type Overrides struct {
	Model           string   `json:"model,omitempty"`
	ReasoningEffort string   `json:"reasoning_effort,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxTokens       *int     `json:"max_tokens,omitempty"`
}

// Clone returns a copy of o sharing no memory with it.
func (o *Overrides) Clone() *Overrides {
	if o == nil {
		return nil
	}
	c := *o
	if o.Temperature != nil {
		t := *o.Temperature
		c.Temperature = &t
	}
	if o.MaxTokens != nil {
		m := *o.MaxTokens
		c.MaxTokens = &m
	}
	return &c
}

// Transition moves s to state to at time now, or reports why it cannot.
func (s *Session) Transition(to State, now time.Time) error {
	if !s.State.CanBecome(to) {
		if s.State == StateClosed {
			return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionClosed, "session %s is closed", PublicID(s.ID))
		}
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeInvalidTransition,
			"session %s cannot go from %s to %s", s.ID, s.State, to)
	}
	s.State = to
	s.UpdatedAt = now
	return nil
}

// Cursor is a place in a listing of sessions: the session that ends a page.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// Older reports whether s comes after c in a listing, newest first.
func (c Cursor) Older(s *Session) bool {
	if !s.CreatedAt.Equal(c.CreatedAt) {
		return s.CreatedAt.Before(c.CreatedAt)
	}
	return s.ID < c.ID
}

// Clone returns a copy of s that shares no memory with it.
func (s Session) Clone() Session {
	s.Metadata = maps.Clone(s.Metadata)
	s.AgentState = bytes.Clone(s.AgentState)
	s.Overrides = s.Overrides.Clone()
	s.Grants = slices.Clone(s.Grants)
	s.ReadCursors = maps.Clone(s.ReadCursors)
	s.Replies = slices.Clone(s.Replies)
	s.Webhooks = slices.Clone(s.Webhooks) // their Events are never changed in place
	s.MCPServers = CloneMCPServers(s.MCPServers)
	s.Agents = slices.Clone(s.Agents)
	if s.Compaction != nil {
		c := *s.Compaction
		s.Compaction = &c
	}
	if s.Imported != nil {
		m := *s.Imported
		s.Imported = &m
	}
	return s
}

// Query selects sessions in a listing, newest first: by CreatedAt, then
// by id for sessions created at the same instant. Empty fields match all.
type Query struct {
	Tenant     string
	Agent      string
	State      State
	ParentID   string
	ForkedFrom string
	// Metadata selects sessions holding every one of these entries.
	Metadata map[string]string
	// CreatedAfter and CreatedBefore, when set, bound CreatedAt
	// (exclusive).
	CreatedAfter, CreatedBefore time.Time
	// After, when set, pages: only sessions that come after it in the
	// listing's order (older ones) are listed. It is the last session of
	// the previous page.
	After *Cursor
	Limit int // at most this many; 0 means no limit
	// ExpiresBefore, when set, selects sessions whose ExpiresAt is set
	// and earlier than it (retention closes them).
	ExpiresBefore time.Time
	// UpdatedBefore, when set, selects sessions last updated before it
	// (retention deletes closed sessions some time after closing them).
	UpdatedBefore time.Time
	// Search, when set, selects sessions whose title or name contains it,
	// ignoring the case of ASCII letters (as SQLite's lower() does).
	Search string
}

// Matches reports whether s passes q's filters, After and Limit aside. A
// session that never expires fails ExpiresBefore. Stores that cannot
// apply every filter in their own query filter with it.
func (q *Query) Matches(s *Session) bool {
	if (q.Tenant != "" && s.Tenant != q.Tenant) ||
		(q.Agent != "" && s.Agent != q.Agent) ||
		(q.State != "" && s.State != q.State) ||
		(q.ParentID != "" && s.ParentID != q.ParentID) ||
		(q.ForkedFrom != "" && s.ForkedFrom != q.ForkedFrom) {
		return false
	}
	for k, v := range q.Metadata {
		if got, ok := s.Metadata[k]; !ok || got != v {
			return false
		}
	}
	switch {
	case !q.CreatedAfter.IsZero() && !s.CreatedAt.After(q.CreatedAfter),
		!q.CreatedBefore.IsZero() && !s.CreatedAt.Before(q.CreatedBefore),
		!q.ExpiresBefore.IsZero() && (s.ExpiresAt.IsZero() || !s.ExpiresAt.Before(q.ExpiresBefore)):
		return false
	}
	if q.Search != "" && !containsFold(s.Title, q.Search) && !containsFold(s.Name, q.Search) {
		return false
	}
	return q.UpdatedBefore.IsZero() || s.UpdatedAt.Before(q.UpdatedBefore)
}

// containsFold reports whether s contains sub, ignoring the case of ASCII
// letters only: every store then agrees, SQLite's lower() included.
func containsFold(s, sub string) bool {
	return strings.Contains(asciiLower(s), asciiLower(sub))
}

// asciiLower lowers the ASCII letters of s and leaves every other byte.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
