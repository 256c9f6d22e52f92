package kernel

import (
	"context"
	"errors"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// errInterrupted cancels a run that new input interrupted.
var errInterrupted = errors.New("run interrupted by new input")

// whileBusy applies req's busy policy to input posted while session s has
// the unfinished run busy. Every policy but reject queues the input as a
// run, which the session's owner then lets wait its turn (queue), start
// at once by stopping the active run (interrupt), or join the active run
// before its next model call (steer; if the run ends first, it runs in its
// place in the queue).
func (k *Kernel) whileBusy(ctx context.Context, s session.Session, busy string, req RunRequest) (session.Run, bool, error) {
	switch req.IfBusy {
	case BusyQueue, BusyInterrupt, BusySteer:
		return k.post(ctx, s, req, req.IfBusy)
	}
	return session.Run{}, false, errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionBusy,
		"session %s is running %s", session.PublicID(s.ID), busy).With("active_run_id", busy)
}

// queuedNotice is the CUSTOM event announcing a queued run. It is logged
// inside the active run, like every event, and names the queued run in its
// value.
func queuedNotice(runID string, position int) session.Event {
	return session.Custom("kerneld.run.queued", map[string]any{"runId": runID, "position": position})
}

// cancelledNotice is the CUSTOM event announcing that a queued run was
// cancelled before it started: a client that saw it queued learns it will
// not see it start.
func cancelledNotice(runID string) session.Event {
	return session.Custom("kerneld.run.cancelled", map[string]any{"runId": runID})
}
