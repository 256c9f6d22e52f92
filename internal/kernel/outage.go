package kernel

import (
	"context"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// While the store cannot take writes (a full disk, Redis out of memory or
// unreachable), a run that stopped cannot record its end. Until it can
// (runner.repair tries again), the run's record still says it is running,
// and its session must not pretend otherwise: it refuses new runs and
// cancels with 503 storage_unavailable rather than queue them behind an
// end that is not coming yet, or report a cancel that cannot happen. The
// stream says nothing false meanwhile: it only ever shows what the log
// holds, and the run's end reaches it once it is recorded.

// awaitingStore marks ar, h's active run, as stopped with its end not yet
// recorded, and wakes those waiting on the run so they can say so.
func (k *Kernel) awaitingStore(h *held, ar *activeRun) {
	ar.unrecorded.Store(true)
	k.changes.notify(h.id)
}

// endUnrecorded reports whether run runID of session sessionID is held
// here and waits for the store to record its end.
func (k *Kernel) endUnrecorded(sessionID, runID string) bool {
	h := k.owner.get(sessionID)
	if h == nil {
		return false
	}
	ar := h.current()
	return ar != nil && ar.run.ID == runID && ar.unrecorded.Load()
}

// errEndUnrecorded is the refusal of a request on session sessionID while
// its run runID waits to record its end.
func errEndUnrecorded(sessionID, runID string) error {
	return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStorageUnavailable,
		"run %s of session %s has stopped, but the store cannot record its end yet; "+
			"it ends interrupted once the store takes writes again: retry later", runID, sessionID).
		With("active_run_id", runID)
}

// awaitCancelled waits for run r, whose cancel is recorded, to end; it
// fails with errEndUnrecorded if the run stops but cannot record its end.
func (k *Kernel) awaitCancelled(ctx context.Context, r session.Run) (session.Run, error) {
	run, err := k.waitRun(ctx, r.SessionID, r.ID, func(run session.Run) bool {
		return ended(run) || k.endUnrecorded(run.SessionID, run.ID)
	})
	if err == nil && !ended(run) {
		return session.Run{}, errEndUnrecorded(r.SessionID, r.ID)
	}
	return run, err
}
