package kernel

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
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
	// beforeHandoff is called by a session's driver once ended, its run,
	// has ended and before the driver picks what runs next.
	beforeHandoff func(ended session.Run)
)

// activeRun is the run a held session is executing, from its start to
// the end its goroutine records.
type activeRun struct {
	run    session.Run // as it started; the run goroutine keeps its own copy
	tenant string      // the session's, whose quotas the run counts against
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the run has ended and been recorded
	// ending is set just before the run emits its terminal event: from
	// then on a steer can no longer join it.
	ending atomic.Bool
	// unrecorded is set once the run has stopped but the store refused its
	// end: it waits for the store (see runner.repair).
	unrecorded atomic.Bool
	events     *eventWriter
	// resuming marks a run that waited for approvals when its previous
	// owner stopped: it picks up its last turn from the log.
	resuming bool

	// Guarded by held.mu:
	steers    []session.Run   // queued steers handed to the run, to join its next model call
	awaiting  map[string]bool // tool calls waiting for a person's decision
	decisions chan decision   // decisions for awaited calls, buffered for all of them
	suspended bool            // it stopped waiting for approvals, to wait again later
}

// newActiveRun returns the record of run, whose context stops with the
// session's (a shutdown, a lost lease).
func newActiveRun(h *held, s session.Session, run session.Run) *activeRun {
	ctx, cancel := context.WithCancelCause(h.ctx)
	return &activeRun{run: run, tenant: s.Tenant, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// current returns the session's active run, or nil.
func (h *held) current() *activeRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active
}

// drive is the body of a held session's driver: it resumes what a previous
// owner left, then starts the session's queued runs one at a time, in
// order, applying what clients ask of them (see control), until none is
// left; then it releases the lease. It stops when the session's context
// ends: at shutdown, after the active run ended or was suspended, and
// when the lease is lost, at once and without writing.
func (k *Kernel) drive(h *held) {
	defer k.changes.notify(h.id)
	if err := k.resumeHeld(h); err != nil && h.ctx.Err() == nil {
		k.log.Error("resume session", "session", h.id, "err", err)
	}
	var tick <-chan time.Time
	if k.repl.CheckInterval > 0 {
		t := time.NewTicker(k.repl.CheckInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		ar := h.current()
		switch {
		case ar == nil && h.ctx.Err() != nil:
			k.owner.release(h)
			return
		case ar == nil:
			if !k.startNext(h) && k.owner.leave(h) {
				return
			}
			continue
		}
		select {
		case <-ar.done:
			k.afterRun(h, ar)
		case <-h.wake:
			k.control(h)
		case <-tick:
			k.control(h)
		case <-h.ctx.Done():
			ar.cancel(context.Cause(h.ctx))
			<-ar.done
			k.afterRun(h, ar)
		}
	}
}

// afterRun forgets h's ended run. When nothing starts next, the session is
// settled: its state tells how the run went. A run lost with the lease
// changes nothing; a suspended one leaves the session waiting.
func (k *Kernel) afterRun(h *held, ar *activeRun) {
	h.mu.Lock()
	h.active = nil
	suspended := ar.suspended
	h.mu.Unlock()
	run, err := k.store.GetRun(context.WithoutCancel(h.ctx), h.id, ar.run.ID)
	if err != nil {
		run = ar.run
	}
	if beforeHandoff != nil {
		beforeHandoff(run)
	}
	k.changes.notify(h.id)
	if suspended || errors.Is(context.Cause(h.ctx), errLeaseLost) {
		return
	}
	if h.ctx.Err() == nil && k.startNext(h) {
		return // the session stays running, under its next run
	}
	k.settle(h, run)
}

// startNext starts the session's first startable queued run and reports
// whether one started. Queued runs that can no longer start (their session
// was closed, their agent is gone) are ended on the way.
func (k *Kernel) startNext(h *held) bool {
	if h.ctx.Err() != nil || k.checkOpen() != nil {
		return false
	}
	queue, err := k.queue(h.ctx, h.id)
	if err != nil {
		k.log.Error("read queue", "session", h.id, "err", err)
		return false
	}
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

// startQueued starts run, queued, as h's active run and reports whether
// it started. A run stopped before it could start (its session closed, a
// cancel that got there first, its agent gone) is recorded as such.
func (k *Kernel) startQueued(h *held, run session.Run) bool {
	if beforeQueuedStart != nil {
		beforeQueuedStart(h.ctx, run)
	}
	if h.ctx.Err() != nil {
		return false
	}
	ctx := context.WithoutCancel(h.ctx)
	s, err := k.store.GetSession(ctx, h.id)
	if err != nil || s.State == session.StateClosed || run.CancelRequested {
		k.endUnstarted(h, run, session.RunCancelled, nil)
		return false
	}
	spec, err := k.runnableAgent(s.Agent)
	if err != nil {
		k.endUnstarted(h, run, session.RunFailed, &session.RunError{Code: session.ErrorCodeInternal, Message: err.Error()})
		return false
	}
	run.Model = k.modelOf(spec, s, run)
	ar := newActiveRun(h, s, run)
	logged, startErr := k.start(ctx, h, s, &ar.run)
	if !logged {
		if !errors.Is(startErr, session.ErrStale) {
			k.log.Error("start run", "session", h.id, "run", run.ID, "err", startErr)
		}
		return false // cancelled meanwhile, or the store failed: the run stays as recorded
	}
	k.launch(h, ar, spec, startErr)
	return true
}

// launch makes ar, whose RUN_STARTED is in the log, h's active run and
// runs it on a goroutine of its own. Once RUN_STARTED is in the log the
// run must end there too: startErr, a failure after that point, ends it
// as internal.
func (k *Kernel) launch(h *held, ar *activeRun, spec agents.Spec, startErr error) {
	ar.events = newEventWriter(k, context.WithoutCancel(ar.ctx), h.token, ar.run.SessionID, ar.run.ID)
	h.mu.Lock()
	h.active = ar
	h.mu.Unlock()
	k.changes.notify(h.id)
	k.quotas.RunStarted(ar.tenant)
	k.wg.Go(func() {
		defer close(ar.done)
		defer ar.cancel(nil)
		defer k.quotas.RunEnded(ar.tenant)
		run := ar.run
		k.execute(h, ar, &run, spec, startErr)
	})
}

// endUnstarted records the end of a queued run that never started, if it
// is still queued; a run cancelled meanwhile stays as it is.
func (k *Kernel) endUnstarted(h *held, run session.Run, state session.RunState, runErr *session.RunError) {
	err := k.updateRun(context.WithoutCancel(h.ctx), &run, func(r *session.Run) error {
		if r.State != session.RunQueued {
			return errUnchanged
		}
		r.State, r.EndedAt, r.Error = state, k.now(), runErr
		return nil
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("record unstarted run", "session", run.SessionID, "run", run.ID, "err", err)
	}
	k.changes.notify(h.id)
}

// settle records on h's session that its last run, ended, is over and
// nothing runs next: its state tells how the run went, and its TTL starts
// again.
func (k *Kernel) settle(h *held, ended session.Run) {
	now := k.now().UTC()
	err := k.updateSession(context.WithoutCancel(h.ctx), h.id, func(s *session.Session) error {
		return afterRun(s, ended, now)
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("record session state", "session", h.id, "run", ended.ID, "err", err)
	}
	k.changes.notify(h.id)
}

// control applies what the store says clients asked of h's session since
// the driver last looked: a closed session, a cancel, approval decisions,
// and new queued runs, which interrupt, steer or wait behind the active
// run as they were posted to.
func (k *Kernel) control(h *held) {
	ctx := context.WithoutCancel(h.ctx)
	ar := h.current()
	if ar == nil {
		return // the driver's loop starts what is queued
	}
	s, err := k.store.GetSession(ctx, h.id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && s.State == session.StateClosed) {
		ar.cancel(errSessionClosed)
		return
	}
	if run, err := k.store.GetRun(ctx, h.id, ar.run.ID); err == nil {
		if run.CancelRequested {
			ar.cancel(errCancelled)
		}
		k.forwardDecisions(h, ar, run.Decisions)
	}
	if queue, err := k.queue(ctx, h.id); err == nil {
		k.takeQueue(h, ar, queue)
	}
}

// takeQueue applies to the queued runs what clients asked of them since
// the driver last looked: a cancel ends one before it starts, and the
// active run's stream says so. It announces the others the driver has not
// seen yet in that stream, and applies their busy policy: an interrupt
// stops the active run, a steer joins it.
func (k *Kernel) takeQueue(h *held, ar *activeRun, queue []session.Run) {
	position := 0
	for _, run := range queue {
		if run.CancelRequested {
			k.endUnstarted(h, run, session.RunCancelled, nil)
			_ = ar.events.write(cancelledNotice(run.ID)) // fails only once the run's end is logged
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
			_ = ar.events.write(queuedNotice(run.ID, position))
		}
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
			ar.decisions <- decision{toolCallID: d.ToolCallID, approve: d.Approve, reason: d.Reason} // buffered for every awaited call
		}
	}
}
