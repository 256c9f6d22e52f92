// Package memory is kerneld's in-process store: sessions, runs, messages,
// memory entries and event logs held in maps and slices, with the same
// semantics as the durable backends and nothing that survives the process.
//
// It serves tests and --store=memory, and satisfies kernel.Store. It must
// not log, do I/O or start goroutines, and it holds no kernel logic: it
// stores what it is given.
//
// Locking: a store-wide RWMutex guards only the map from session id to
// record (and the creation order); each record has its own RWMutex for
// that session's data. Appending to one session therefore never waits on
// another session's appends. When both are taken, the store lock comes
// first; nothing takes it while holding a record lock. The tables of
// images and schedules have a lock each, taken after a record's (a put
// holds its session's read lock so that DeleteSession cannot pass it) and
// never with the other.
package memory

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Store is an in-process store. The zero value is not usable; call New.
// Every method is safe for concurrent use. Contexts are accepted for the
// interface's sake and ignored: no operation blocks on I/O.
type Store struct {
	now func() time.Time // the clock leases expire by

	mu       sync.RWMutex
	sessions map[string]*record
	order    []*record // every session, oldest first (see session.Query)
	// byMetadata lists the sessions holding each metadata entry, ordered
	// as order, so that a metadata filter reads only those.
	byMetadata map[metaEntry][]*record

	tokens atomic.Int64 // the last fencing token given out, by any session

	outbox outbox // webhook deliveries (outbox.go); its own lock, taken under none of the above

	images    imageTable    // see images.go
	schedules scheduleTable // see schedules.go
	feeds     feedTable     // see feed.go
}

// record is one session with everything that belongs to it.
type record struct {
	mu      sync.RWMutex
	deleted bool           // set by DeleteSession so holders of a stale pointer fail
	key     session.Cursor // its place in s.order; changed with both locks held
	sess    session.Session
	runs    []session.Run  // in creation order
	runAt   map[string]int // index in runs by run id
	msgs    []session.Message
	memory  map[string]session.MemoryEntry // nil until the first PutMemory
	pages   [][]session.Event              // the log, paged: seq s is at index s-1
	arena   []byte                         // backing store for events' Data and Meta
	lease   lease
}

// lease is a session's lease; token 0 means none was ever given.
type lease struct {
	token   int64
	expires time.Time
}

// New returns an empty store whose leases expire by the wall clock.
func New() *Store { return NewWithClock(time.Now) }

// NewWithClock returns an empty store whose leases expire by now.
func NewWithClock(now func() time.Time) *Store {
	return &Store{now: now, sessions: make(map[string]*record), byMetadata: make(map[metaEntry][]*record)}
}

// Close releases nothing: the store holds no resources beyond memory. It
// exists so the store closes like the durable backends.
func (s *Store) Close() error { return nil }

// Ping reports that the store can serve requests, which it always can.
func (s *Store) Ping(ctx context.Context) error { return nil }

// record returns the live record of session id. Callers lock it and must
// re-check deleted, since DeleteSession may win the race for its lock.
func (s *Store) record(id string) (*record, error) {
	s.mu.RLock()
	rec := s.sessions[id]
	s.mu.RUnlock()
	if rec == nil {
		return nil, session.SessionNotFound(id)
	}
	return rec, nil
}

// read runs fn on session id's record under its read lock.
func (s *Store) read(id string, fn func(*record) error) error {
	rec, err := s.record(id)
	if err != nil {
		return err
	}
	rec.mu.RLock()
	defer rec.mu.RUnlock()
	if rec.deleted {
		return session.SessionNotFound(id)
	}
	return fn(rec)
}

// write runs fn on session id's record under its write lock.
func (s *Store) write(id string, fn func(*record) error) error {
	rec, err := s.record(id)
	if err != nil {
		return err
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.deleted {
		return session.SessionNotFound(id)
	}
	return fn(rec)
}

// cloneRun returns r sharing no memory with the original.
func cloneRun(r session.Run) session.Run { return r.Clone() }

// cloneMessage returns m sharing no memory with the original.
func cloneMessage(m session.Message) session.Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.Images = slices.Clone(m.Images)
	if m.Compaction != nil {
		c := *m.Compaction
		m.Compaction = &c
	}
	return m
}

// cloneEntry returns e sharing no memory with the original.
func cloneEntry(e session.MemoryEntry) session.MemoryEntry {
	e.Value = bytes.Clone(e.Value)
	return e
}
