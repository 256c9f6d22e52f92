package kernel

import (
	"context"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Store is what the kernel needs from durable storage. It is declared here,
// by its consumer; the backends in internal/store implement it and
// internal/store/storetest checks that they agree.
//
// Every method returns an error wrapping errdefs.ErrNotFound for a missing
// session, run or key. Returned values never alias the store's own memory.
type Store interface {
	SessionStore
	RunStore
	MessageStore
	MemoryStore
	EventLog
	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
}

// SessionQuery selects sessions for ListSessions.
type SessionQuery = session.Query

// SessionStore persists sessions.
type SessionStore interface {
	// CreateSession stores a new session; an existing id is ErrConflict.
	CreateSession(ctx context.Context, s session.Session) error
	GetSession(ctx context.Context, id string) (session.Session, error)
	// UpdateSession replaces the stored session with s, except LastSeq,
	// which only AppendEvents moves.
	UpdateSession(ctx context.Context, s session.Session) error
	// DeleteSession removes the session with its runs, messages, memory
	// and events. It does not touch child sessions.
	DeleteSession(ctx context.Context, id string) error
	// ListSessions returns matching sessions, newest (largest id) first.
	ListSessions(ctx context.Context, q SessionQuery) ([]session.Session, error)
}

// RunStore persists runs.
type RunStore interface {
	// CreateRun stores a new run of an existing session.
	CreateRun(ctx context.Context, r session.Run) error
	GetRun(ctx context.Context, sessionID, runID string) (session.Run, error)
	UpdateRun(ctx context.Context, r session.Run) error
	// ListRuns returns a session's runs newest first; before, when not
	// empty, is a run id and only older runs are listed.
	ListRuns(ctx context.Context, sessionID, before string, limit int) ([]session.Run, error)
	// FindRunByIdempotencyKey returns the newest run of the session created
	// with key at or after since.
	FindRunByIdempotencyKey(ctx context.Context, sessionID, key string, since time.Time) (session.Run, error)
	// ListRunsByState returns every run, of any session, in one of states,
	// oldest first. Startup recovery uses it.
	ListRunsByState(ctx context.Context, states ...session.RunState) ([]session.Run, error)
}

// MessageStore persists the conversation history.
type MessageStore interface {
	// AppendMessages adds messages to the end of their sessions' histories,
	// assigning each its Position.
	AppendMessages(ctx context.Context, msgs ...session.Message) error
	// ListMessages returns messages with Position > after, oldest first.
	ListMessages(ctx context.Context, sessionID string, after int64, limit int) ([]session.Message, error)
	// RecentMessages returns the last n messages, oldest first.
	RecentMessages(ctx context.Context, sessionID string, n int) ([]session.Message, error)
}

// MemoryStore persists each session's key/value memory.
type MemoryStore interface {
	GetMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error)
	// PutMemory creates or replaces an entry. Creating one when the session
	// already holds maxEntries is ErrExhausted.
	PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error
	DeleteMemory(ctx context.Context, sessionID, key string) error
	// ListMemory returns a session's entries sorted by key.
	ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error)
}

// EventLog is the durable per-session event log, the source of truth for
// every stream.
type EventLog interface {
	// AppendEvents appends events of one session. It gives each the next
	// seq of that session (strictly increasing, no gaps), writes them in
	// place, advances the session's LastSeq, and returns only once the
	// batch is durable. Either the whole batch is appended or none of it.
	AppendEvents(ctx context.Context, evs []session.Event) error
	// ReadEvents returns a session's events with seq > after in seq order;
	// limit <= 0 means all of them.
	ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error)
}

// Observer sees what the kernel emits once the event log has made it
// durable. Observers are called from run goroutines and must not block:
// the SSE hub, metrics and logging implement it.
type Observer interface {
	// ObserveEvents is called with each appended batch, in seq order per
	// session.
	ObserveEvents(evs []session.Event)
	// ObserveSessionEnded is called once a session is closed or deleted;
	// lastSeq is the seq of its final event.
	ObserveSessionEnded(sessionID string, lastSeq int64)
}
