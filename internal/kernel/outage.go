package kernel

import (
	"context"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// While the store cannot take writes (a full disk, Redis out of memory or
// unreachable), a run pauses: its event writer retries each append for up
// to a lease TTL, and past that the run stops unfinished, to be continued
// from its last completed step once the store answers (see
// runcontinue.go). Meanwhile the run's record still says it is running,
// and its session must not pretend otherwise: it refuses new runs and
// cancels with 503 storage_unavailable rather than queue them behind a run
// that cannot go on yet, or report a cancel that cannot happen; /readyz
// says the store is unavailable. The stream says nothing false meanwhile:
// it only ever shows what the log holds.

// paused reports whether run runID of session sessionID is held here and
// paused until the store takes writes again.
func (k *Kernel) paused(sessionID, runID string) bool {
	h := k.owner.get(sessionID)
	if h == nil {
		return false
	}
	ar := h.current()
	return ar != nil && ar.run.ID == runID && ar.paused.Load()
}

// errPaused is the refusal of a request on session sessionID while its
// run runID is paused for the store.
func errPaused(sessionID, runID string) error {
	return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStorageUnavailable,
		"run %s of session %s is paused: the store cannot take its writes; "+
			"it goes on once the store takes writes again: retry later", runID, sessionID).
		With("active_run_id", runID)
}

// awaitCancelled waits for run r, whose cancel is recorded, to end; if
// the run pauses for the store instead, it fails saying that the cancel
// stands: the run ends cancelled once the store takes writes again.
func (k *Kernel) awaitCancelled(ctx context.Context, r session.Run) (session.Run, error) {
	run, err := k.waitRun(ctx, r.SessionID, r.ID, func(run session.Run) bool {
		return ended(run) || k.paused(run.SessionID, run.ID)
	})
	if err == nil && !ended(run) {
		return session.Run{}, errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStorageUnavailable,
			"the cancel of run %s of session %s is recorded, but the store cannot take the run's end yet: "+
				"the run ends cancelled once the store takes writes again; retry to see it ended", r.ID, r.SessionID).
			With("active_run_id", r.ID)
	}
	return run, err
}

// pausedRuns reports whether a run held here is paused for the store.
func (o *owner) pausedRuns() bool {
	hs := o.sessions()
	for _, h := range hs {
		if ar := h.current(); ar != nil && ar.paused.Load() {
			return true
		}
	}
	return false
}
