package session

import (
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// What several replicas sharing one store need from each other (DESIGN.md
// §8): optimistic versions on records, a lease per session whose fencing
// token every append carries, idempotent run creation checked inside the
// store, and small signals between replicas.
//
// The error values below are shared: wrap them with %w to add context and
// never modify them.
var (
	// ErrStale says a versioned update carried a Version other than the
	// stored one: someone else changed the record since it was read.
	ErrStale = errdefs.New(errdefs.ErrConflict, errdefs.CodeStaleRecord,
		"the record changed since it was read")
	// ErrFenced says the session's lease is not held with the token an
	// append or renewal carried (it expired, was released or was taken
	// over), so nothing was written. The replica must stop working on the
	// session.
	ErrFenced = errdefs.New(errdefs.ErrUnavailable, errdefs.CodeLeaseLost,
		"the session's lease is no longer held")
	// ErrLeaseHeld says another live lease holds the session.
	ErrLeaseHeld = errdefs.New(errdefs.ErrConflict, errdefs.CodeLeaseHeld,
		"the session's lease is held")
)

// RunConstraints are checked atomically with a run's creation, so two
// replicas racing to create runs cannot both get past them.
type RunConstraints struct {
	// IdempotentSince, when set, makes a run whose IdempotencyKey was
	// already used by a run of the session created at or after it a
	// DuplicateRunError instead of a new run. Zero: the key is not checked.
	IdempotentSince time.Time
	// MaxQueued bounds the session's queued runs when a queued run is
	// created (ErrExhausted, code "queue_full"). 0: no bound.
	MaxQueued int
}

// DuplicateRunError says a run was not created because an earlier run of
// the session carries the same idempotency key; Run is that earlier run,
// which the caller answers with instead. It matches errdefs.ErrConflict
// and has the code "idempotent_replay".
type DuplicateRunError struct{ Run Run }

func (e *DuplicateRunError) Error() string {
	return "run " + e.Run.ID + " was already created with idempotency key " + e.Run.IdempotencyKey
}

// Unwrap returns the coded error, so errdefs.CodeOf finds the code.
func (e *DuplicateRunError) Unwrap() error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeIdempotentReplay, "%s", e.Error())
}

// Is makes a DuplicateRunError match errdefs.ErrConflict.
func (e *DuplicateRunError) Is(target error) bool { return target == errdefs.ErrConflict }

// QueueFull refuses a queued run beyond RunConstraints.MaxQueued.
func QueueFull(sessionID string, limit int) error {
	return errdefs.New(errdefs.ErrExhausted, errdefs.CodeQueueFull, "session %s already has %d inputs waiting", PublicID(sessionID), limit)
}

// RunExists refuses a run whose id its session already has.
func RunExists(id string) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeRunExists, "run %s already exists", id)
}

// Signal tells the replicas sharing a store that a session changed there.
// Signals may be lost: the store is the truth, and every receiver acts by
// reading it again (owners also re-read their sessions periodically).
type Signal struct {
	Kind      SignalKind
	SessionID string
	RunID     string // the run concerned, if any
	Seq       int64  // SignalEnded: the session's last seq
	From      string // the replica that sent it
}

// SignalKind says what changed.
type SignalKind string

// Signal kinds.
const (
	// SignalChanged: a session's runs or record changed. Its owner reads
	// them again; whoever waits on them looks again.
	SignalChanged SignalKind = "changed"
	// SignalEnded: a session was closed or deleted. Its streams end once
	// they have delivered Seq.
	SignalEnded SignalKind = "ended"
	// SignalReleased: a session's owner, shutting down, let its lease go
	// with work left (a run to continue, queued runs). Every replica that
	// receives it tries to take the session at once rather than at its
	// next scan.
	SignalReleased SignalKind = "released"
)
