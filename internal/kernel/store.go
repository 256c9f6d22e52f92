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
	LeaseStore
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
	// which only AppendEvents moves, if the stored Version is s.Version;
	// the stored Version becomes s.Version+1. Otherwise it changes nothing
	// and returns session.ErrStale.
	UpdateSession(ctx context.Context, s session.Session) error
	// DeleteSession removes the session with its runs, messages, memory,
	// events and lease. It does not touch child sessions.
	DeleteSession(ctx context.Context, id string) error
	// ListSessions returns matching sessions, most recently created first.
	ListSessions(ctx context.Context, q SessionQuery) ([]session.Session, error)
	// CountSessions returns how many sessions tenant has stored, for its
	// quota; it reads an index, never the sessions.
	CountSessions(ctx context.Context, tenant string) (int, error)
}

// RunStore persists runs.
type RunStore interface {
	// CreateRun stores a new run of an existing session. A run id the
	// session already has is ErrConflict (session.RunExists). The checks
	// of c are made atomically with the insert: a taken idempotency key
	// is a *session.DuplicateRunError carrying the run that took it, a
	// full queue ErrExhausted (session.QueueFull).
	CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error
	GetRun(ctx context.Context, sessionID, runID string) (session.Run, error)
	// UpdateRun replaces the stored run with r under UpdateSession's
	// version rule.
	UpdateRun(ctx context.Context, r session.Run) error
	// FindRunByIdempotencyKey returns the newest run of the session created
	// with key at or after since.
	FindRunByIdempotencyKey(ctx context.Context, sessionID, key string, since time.Time) (session.Run, error)
	// ListRuns returns a session's runs matching q, most recently created
	// first.
	ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error)
	// ListRunsByState returns every run, of any session, in one of states,
	// oldest first. Recovery and take-over use it.
	ListRunsByState(ctx context.Context, states ...session.RunState) ([]session.Run, error)
	// StartRun writes st, which starts a run, at once, while the session's
	// lease is held with token: the run's record (created, or updated from
	// queued), the session's, the events that open the run and the messages
	// it adds to the history. Either all of it is written or none of it;
	// the errors are those of CreateRun (when st.Create), UpdateRun,
	// UpdateSession and AppendEvents. Once it returns, st.Events carry
	// their seqs and st.Messages their positions; the stored run's
	// StartSeq is st.Events[0]'s seq.
	StartRun(ctx context.Context, token int64, st *session.RunStart) error
}

// MessageStore persists the conversation history.
type MessageStore interface {
	// AppendMessages adds messages to the end of their session's history,
	// assigning each its Position, while the session's lease is held with
	// token (see EventLog.AppendEvents).
	AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error
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
	// AppendEvents appends events of one session while the session's lease
	// is held with token, checked atomically with the append; otherwise it
	// appends nothing and returns session.ErrFenced. It gives each event
	// the next seq of that session (strictly increasing, no gaps), writes
	// them in place, advances the session's LastSeq, and returns only once
	// the batch is durable. Either the whole batch is appended or none of
	// it.
	AppendEvents(ctx context.Context, token int64, evs []session.Event) error
	// ReadEvents returns a session's events with seq > after in seq order;
	// limit <= 0 means all of them.
	ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error)
}

// LeaseStore grants the right to run a session's runs: a replica appends
// to a session only while it holds the session's lease, and every append
// carries the lease's fencing token, so a replica that lost its lease
// (paused, partitioned) can never append again. A store used by one
// process grants them from memory.
type LeaseStore interface {
	// AcquireLease claims session id for holder until ttl passes. It
	// returns the lease's fencing token, greater than any token given
	// before for that session. Another live lease is
	// session.ErrLeaseHeld; a missing session is not found.
	AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (token int64, err error)
	// RenewLease extends the lease held with token to ttl from now; a lease
	// no longer held with token (expired, released, taken) is
	// session.ErrFenced.
	RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) error
	// ReleaseLease ends the lease if it is still held with token.
	ReleaseLease(ctx context.Context, sessionID string, token int64) error
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
