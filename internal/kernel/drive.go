package kernel

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Test hooks, nil outside tests. Each lets a test act inside a window too
// short to hit reliably by timing alone.
var (
	// beforeQueuedStart is called by a session's driver once it picked run,
	// queued, to start next and before it starts it; ctx is the session's.
	beforeQueuedStart func(ctx context.Context, run session.Run)
	// queuedRecorded is called once a run posted to a busy session is
	// stored as queued and before its session's owner is told.
	queuedRecorded func(run session.Run)
	// afterRunEnded is called by a session's driver once ended, its run,
	// has stopped and before the driver picks what runs next.
	afterRunEnded func(ended session.Run)
	// drainAsked is called by Drain once it has asked every run to leave,
	// before it waits for them.
	drainAsked func()
)

// drive is the body of a held session's driver: it takes up what a
// previous owner left (see continueLeft), then starts the session's
// queued runs one at a time, in order, applying what clients ask of them
// (see control), until none is left; then it releases the lease. It stops
// when the session's context ends (a lost lease, a shutdown past its drain
// budget), or once the kernel is closing and its run has left.
func (k *Kernel) drive(h *held) {
	defer k.changes.notify(h.id)
	k.continueLeft(h)
	var tick <-chan time.Time
	if k.repl.CheckInterval > 0 {
		t := time.NewTicker(k.repl.CheckInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		ar := h.current()
		if ar == nil {
			if h.ctx.Err() == nil && k.startNext(h) {
				continue
			}
			if k.owner.leave(h) {
				return
			}
			continue
		}
		select {
		case <-ar.done:
			k.runStopped(h, ar)
		case <-h.wake:
			k.control(h)
		case <-tick:
			h.wakes.Add(1) // a signal may have been lost: what the driver knows may be out of date
			k.control(h)
		case <-h.ctx.Done():
			ar.cancel(context.Cause(h.ctx))
			<-ar.done
			k.runStopped(h, ar)
		}
	}
}

// startNext starts the session's first startable queued run and reports
// whether one started. Queued runs that can no longer start (their session
// was closed, their agent is gone) are ended on the way.
func (k *Kernel) startNext(h *held) bool {
	if h.ctx.Err() != nil || k.checkOpen() != nil || h.queueEmpty() {
		return false
	}
	wakes := h.wakes.Load()
	queue, err := k.queue(h.ctx, h.id)
	if err != nil {
		k.log.Error("read queue", "session", h.id, "err", err)
		return false
	}
	h.sawQueue(wakes, len(queue))
	for _, run := range queue {
		if k.startQueued(h, run) {
			return true
		}
	}
	return false
}

// queue returns the session's queued runs in the order they start: those
// that interrupted the run before them first, then the others, each in the
// order they were posted.
func (k *Kernel) queue(ctx context.Context, id string) ([]session.Run, error) {
	runs, err := k.store.ListRuns(ctx, id, session.RunQuery{States: []session.RunState{session.RunQueued}})
	if err != nil {
		return nil, err
	}
	slices.Reverse(runs) // oldest first
	slices.SortStableFunc(runs, func(a, b session.Run) int {
		return boolOrder(b.IfBusy == string(BusyInterrupt), a.IfBusy == string(BusyInterrupt))
	})
	return runs, nil
}

// boolOrder orders true before false.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// control applies what the store says clients asked of h's session since
// the driver last looked: a closed session, a cancel, approval decisions,
// and new queued runs, which interrupt, steer or wait behind the active
// run as they were posted to.
func (k *Kernel) control(h *held) {
	ctx := context.WithoutCancel(h.ctx)
	ar := h.current()
	if ar == nil || ar.paused.Load() {
		return // the driver's loop starts what is queued, or waits for the store
	}
	s, err := k.store.GetSession(ctx, h.id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && s.State == session.StateClosed) {
		k.cancelQueue(h, ar)
		ar.cancel(errSessionClosed)
		return
	}
	if run, err := k.store.GetRun(ctx, h.id, ar.run.ID); err == nil {
		if run.CancelRequested {
			ar.cancel(errCancelled)
		}
		k.forwardDecisions(h, ar, run.Decisions)
	}
	wakes := h.wakes.Load()
	if queue, err := k.queue(ctx, h.id); err == nil {
		h.sawQueue(wakes, len(queue))
		k.takeQueue(h, ar, queue)
	}
}

// takeQueue applies to the queued runs what clients asked of them since
// the driver last looked: a cancel ends one before it starts, and the
// active run's stream says so. It announces the others the driver has not
// seen yet in that stream, and applies their busy policy: an interrupt
// stops the active run, a steer joins it. The notices are posted to the
// active run, whose goroutine logs them.
func (k *Kernel) takeQueue(h *held, ar *activeRun, queue []session.Run) {
	position := 0
	for _, run := range queue {
		if run.CancelRequested {
			k.endQueued(h, run, session.RunCancelled, nil)
			ar.notices.post(cancelledNotice(run.ID)) // refused only once the run's end is logged
			continue
		}
		position++
		h.mu.Lock()
		known := h.known[run.ID]
		h.known[run.ID] = true
		h.mu.Unlock()
		switch {
		case known:
		case run.IfBusy == string(BusySteer) && k.steerInto(h, ar, run):
			// its input joins the run; no queue to wait in
		default:
			if run.IfBusy == string(BusyInterrupt) {
				ar.cancel(errInterrupted)
			}
			ar.notices.post(queuedNotice(run.ID, position))
		}
	}
}

// cancelQueue ends the queued runs of h's session, which was closed, as
// cancelled, as a client's cancel ends one: recorded first, then said in
// the active run's stream, which logs the notices before its own end.
// (Queued runs found once no run is active are ended as the driver picks
// them, with nothing to log them in; see startQueued.)
func (k *Kernel) cancelQueue(h *held, ar *activeRun) {
	queue, err := k.queue(context.WithoutCancel(h.ctx), h.id)
	if err != nil {
		k.log.Error("read queue", "session", h.id, "err", err) // the driver ends them as it picks them
		return
	}
	for _, run := range queue {
		k.endQueued(h, run, session.RunCancelled, nil)
		ar.notices.post(cancelledNotice(run.ID)) // refused only once the run's end is logged
	}
}

// steerInto hands steer, queued, to ar to join its next model call, and
// reports whether it did: not once ar is ending.
func (k *Kernel) steerInto(h *held, ar *activeRun, steer session.Run) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ar.ending.Load() {
		return false
	}
	for _, s := range ar.steers {
		if s.ID == steer.ID {
			return true
		}
	}
	ar.steers = append(ar.steers, steer)
	h.known[steer.ID] = true
	return true
}

// stopHere stops the active run of session sessionID with cause at once,
// when this replica runs it (and, if runID is set, it is that run): the
// stop lands before the run's next step, where the session's driver,
// told, might land it a step later.
func (k *Kernel) stopHere(sessionID, runID string, cause error) {
	h := k.owner.get(sessionID)
	if h == nil {
		return
	}
	if ar := h.current(); ar != nil && (runID == "" || ar.run.ID == runID) {
		ar.cancel(cause)
	}
}

// interruptHere stops the active run when this replica runs session
// sessionID, for by, a run just queued to interrupt it; its driver would
// too, a moment later, when told. by is remembered until it starts: a
// run the driver picked to start before by was queued, and starts only
// now, is interrupted as it starts, not let run to its end.
func (k *Kernel) interruptHere(sessionID string, by session.Run) {
	h := k.owner.get(sessionID)
	if h == nil {
		return
	}
	h.mu.Lock()
	h.interrupter = &by
	ar := h.active
	h.mu.Unlock()
	if ar != nil {
		ar.cancel(errInterrupted)
	}
}

// interruptedAtStart reports whether run, starting now, was posted before
// the run queued to interrupt the session's run, and forgets that run if
// it is the one starting or ending. Call with h.mu held.
func (h *held) interruptedAtStart(run session.Run) bool {
	by := h.interrupter
	switch {
	case by == nil:
		return false
	case by.ID == run.ID:
		h.interrupter = nil
		return false
	}
	return run.CreatedAt.Before(by.CreatedAt) || (run.CreatedAt.Equal(by.CreatedAt) && run.ID < by.ID)
}

// steerHere hands steer to the active run at once when this replica runs
// session sessionID, so that a steer posted while a tool runs joins that
// run's next model call for sure; its driver would hand it over too, a
// moment later, when told.
func (k *Kernel) steerHere(sessionID string, steer session.Run) {
	h := k.owner.get(sessionID)
	if h == nil {
		return
	}
	if ar := h.current(); ar != nil {
		k.steerInto(h, ar, steer)
	}
}

// forwardDecisions hands the run the decisions made for the tool calls it
// awaits, each once.
func (k *Kernel) forwardDecisions(h *held, ar *activeRun, ds []session.Decision) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range ds {
		if ar.awaiting[d.ToolCallID] {
			delete(ar.awaiting, d.ToolCallID)
			ar.decisions <- decision{toolCallID: d.ToolCallID, approve: d.Approve, reason: d.Reason,
				always: d.Always, sameArguments: d.SameArguments} // buffered for every awaited call
		}
	}
}
