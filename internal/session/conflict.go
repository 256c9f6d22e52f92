package session

import (
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// The errors a store gives when concurrent writers meet, shared by every
// backend so the kernel handles them the same whichever is configured.
var (
	// ErrStale refuses an update made from an outdated version of a record:
	// read it again, reapply the change, and try again.
	ErrStale = errdefs.New(errdefs.ErrConflict, "stale_record", "the record changed since it was read")
	// ErrFenced refuses a write to a session whose lease the writer no
	// longer holds: another replica may own the session now.
	ErrFenced = errdefs.New(errdefs.ErrUnavailable, "lease_lost", "the session's lease is no longer held")
	// ErrLeaseHeld refuses a lease another holder has.
	ErrLeaseHeld = errdefs.New(errdefs.ErrConflict, "lease_held", "another replica holds the session's lease")
)

// RunConstraints are the checks a store makes atomically with creating a
// run, so that replicas racing to create runs cannot both pass them.
type RunConstraints struct {
	// IdempotentSince, when set, refuses a run whose IdempotencyKey a run
	// of the same session created at or after it already carries.
	IdempotentSince time.Time
	// MaxQueued, when positive, refuses a queued run when the session
	// already holds that many queued runs.
	MaxQueued int
}

// DuplicateRunError refuses a run whose idempotency key is taken; Run is
// the run that took it.
type DuplicateRunError struct {
	Run Run
}

func (e *DuplicateRunError) Error() string {
	return "run " + e.Run.ID + " was created with the same idempotency key"
}

// Is makes a DuplicateRunError match errdefs.ErrConflict.
func (e *DuplicateRunError) Is(target error) bool { return target == errdefs.ErrConflict }

// QueueFull refuses a queued run beyond RunConstraints.MaxQueued.
func QueueFull(sessionID string, limit int) error {
	return errdefs.New(errdefs.ErrExhausted, "queue_full", "session %s already has %d inputs waiting", sessionID, limit)
}

// RunExists refuses a run whose id its session already has.
func RunExists(id string) error {
	return errdefs.New(errdefs.ErrConflict, "run_exists", "run %s already exists", id)
}
