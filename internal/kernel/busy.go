package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// errInterrupted cancels a run that new input interrupted.
var errInterrupted = errors.New("run interrupted by new input")

// Test hooks, nil outside tests. Each lets a test act inside a window too
// short to hit reliably by timing alone.
var (
	// beforeQueuedStart is called on a session's run goroutine once
	// handoff has made run the session's active run and before it starts;
	// ctx is the run's own.
	beforeQueuedStart func(ctx context.Context, run session.Run)
	// queuedRecorded is called by enqueue once run is stored as queued and
	// before it joins its queue.
	queuedRecorded func(run session.Run)
	// beforeHandoff is called on a session's run goroutine once ended, its
	// run, is recorded as ended and before handoff picks its successor.
	beforeHandoff func(ended session.Run)
)

// queuedRun is a run waiting for the session's active run to end.
type queuedRun struct {
	run          session.Run
	interrupting bool // it interrupted the run before it: it goes first
}

// whileBusy applies req's busy policy to input that arrived while busy is
// running in session s. The caller holds s's lock, so busy cannot hand off
// meanwhile, though it may already be ending.
func (k *Kernel) whileBusy(ctx context.Context, s session.Session, busy *activeRun, req RunRequest) (session.Run, error) {
	switch req.IfBusy {
	case BusySteer:
		if run, ok, err := k.steer(ctx, s.ID, busy, req.Input); ok || err != nil {
			return run, err
		}
		return k.enqueue(ctx, s.ID, busy, req, false) // it is ending: no model call left to join
	case BusyQueue:
		return k.enqueue(ctx, s.ID, busy, req, false)
	case BusyInterrupt:
		run, err := k.enqueue(ctx, s.ID, busy, req, true)
		if err == nil {
			busy.cancel(errInterrupted)
		}
		return run, err
	}
	return session.Run{}, errdefs.New(errdefs.ErrConflict, "session_busy",
		"session %s is running %s", s.ID, busy.runID).With("active_run_id", busy.runID)
}

// steer adds input to busy's next model call and returns busy's run. ok is
// false when busy is already ending.
func (k *Kernel) steer(ctx context.Context, sessionID string, busy *activeRun, input string) (session.Run, bool, error) {
	k.mu.Lock()
	if busy.ending.Load() {
		k.mu.Unlock()
		return session.Run{}, false, nil
	}
	if len(busy.steered)+len(busy.queue) >= k.limits.MaxQueued {
		k.mu.Unlock()
		return session.Run{}, false, queueFull(sessionID, k.limits.MaxQueued)
	}
	busy.steered = append(busy.steered, input)
	k.mu.Unlock()
	run, err := k.store.GetRun(ctx, sessionID, busy.runID)
	if err != nil {
		return session.Run{}, false, fmt.Errorf("get run: %w", err)
	}
	return run, true, nil
}

// enqueue records a queued run behind busy: FIFO, except that an
// interrupting run goes ahead of the others (behind earlier interrupts).
// The caller holds the session's lock, which handoff takes to choose busy's
// successor: so the run joins busy's queue before that choice, never after
// it, when nobody would start it.
func (k *Kernel) enqueue(ctx context.Context, sessionID string, busy *activeRun, req RunRequest, interrupting bool) (session.Run, error) {
	k.mu.Lock()
	full := len(busy.queue)+len(busy.steered) >= k.limits.MaxQueued
	k.mu.Unlock()
	if full {
		return session.Run{}, queueFull(sessionID, k.limits.MaxQueued)
	}
	run := session.Run{ID: session.NewID(), SessionID: sessionID, State: session.RunQueued, Input: req.Input,
		IdempotencyKey: req.IdempotencyKey, CreatedAt: k.now()}
	if err := k.store.CreateRun(ctx, run); err != nil {
		return session.Run{}, fmt.Errorf("create run: %w", err)
	}
	if queuedRecorded != nil {
		queuedRecorded(run)
	}
	k.mu.Lock()
	at := len(busy.queue)
	if interrupting {
		at = 0
		for at < len(busy.queue) && busy.queue[at].interrupting {
			at++
		}
	}
	busy.queue = append(busy.queue[:at], append([]queuedRun{{run: run, interrupting: interrupting}}, busy.queue[at:]...)...)
	k.noticeLocked(busy, queuedNotice(run.ID, at+1))
	k.mu.Unlock()
	return run, nil
}

func queueFull(sessionID string, limit int) error {
	return errdefs.New(errdefs.ErrExhausted, "queue_full", "session %s already has %d inputs waiting", sessionID, limit)
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

// noticeLocked logs ev inside busy's run, or, if busy has not logged its
// RUN_STARTED yet, right after it. A run that has ended drops it: nothing
// is logged between runs. k.mu is held.
func (k *Kernel) noticeLocked(busy *activeRun, ev session.Event) {
	if busy.events == nil {
		busy.notices = append(busy.notices, ev)
		return
	}
	_ = busy.events.write(ev) // fails only once busy's end is logged
}

// handoff is called when ar's run, ended, has been recorded. It turns
// inputs still waiting to steer ar into queued runs; then, under the
// session's lock, which every enqueue holds, it picks ar's successor,
// records the change on the session and returns the successor, or nil
// when the session is free.
func (k *Kernel) handoff(ar *activeRun, ended session.Run) (*activeRun, session.Run) {
	k.queueSteers(ended.SessionID, ar)
	if beforeHandoff != nil {
		beforeHandoff(ended)
	}
	unlock := k.lockSession(ended.SessionID)
	nar, next := k.successor(ended.SessionID, ar)
	k.settle(ended, next.ID)
	unlock()
	ar.finished()
	return nar, next
}

// successor makes the first run queued behind ar the session's active run
// and returns it; with nothing queued, or the kernel closing, it removes
// ar and returns nil. Runs still queued when the kernel closes stay queued
// in the store, and the next start resumes them.
func (k *Kernel) successor(sessionID string, ar *activeRun) (*activeRun, session.Run) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(ar.queue) == 0 || k.closed {
		if k.active[sessionID] == ar {
			delete(k.active, sessionID)
		}
		return nil, session.Run{}
	}
	next := ar.queue[0].run
	nar := k.newActiveRun(next.ID)
	nar.queue = ar.queue[1:]
	k.active[sessionID] = nar
	return nar, next
}

// queueSteers turns the inputs that arrived to steer ar's run, which ended
// before another model call, into queued runs behind the others.
func (k *Kernel) queueSteers(sessionID string, ar *activeRun) {
	k.mu.Lock()
	inputs := ar.steered
	ar.steered = nil
	k.mu.Unlock()
	for _, input := range inputs {
		run := session.Run{ID: session.NewID(), SessionID: sessionID, State: session.RunQueued, Input: input, CreatedAt: k.now()}
		if err := k.store.CreateRun(context.WithoutCancel(k.ctx), run); err != nil {
			k.log.Error("queue steered input", "session", sessionID, "err", err)
			continue
		}
		k.mu.Lock()
		ar.queue = append(ar.queue, queuedRun{run: run})
		k.mu.Unlock()
	}
}

// startQueued starts ar's queued run: it is recorded as started, RUN_STARTED
// is logged and its writer opened. ok is false when it did not start (the
// session was closed, the run was cancelled, the kernel is closing, its
// agent is unavailable, the store failed); the run is then recorded as
// cancelled or failed, or left queued, and the caller hands off.
func (k *Kernel) startQueued(ar *activeRun, run *session.Run) (spec agents.Spec, startErr error, ok bool) {
	if beforeQueuedStart != nil {
		beforeQueuedStart(ar.ctx, *run)
	}
	ctx := context.WithoutCancel(k.ctx)
	unlock := k.lockSession(run.SessionID)
	defer unlock()
	s, err := k.store.GetSession(ctx, run.SessionID)
	if err != nil || s.State == session.StateClosed || errors.Is(context.Cause(ar.ctx), errSessionClosed) {
		k.cancelQueue(ar, run)
		return spec, nil, false
	}
	if k.stoppedBeforeStart(ar, run) {
		return spec, nil, false
	}
	if spec, err = k.runnableAgent(s.Agent); err != nil {
		k.endUnstarted(run, session.RunFailed, &session.RunError{Code: session.ErrorCodeInternal, Message: err.Error()})
		return spec, nil, false
	}
	logged, startErr := k.start(ctx, s, run)
	if !logged {
		k.abandon(s, run)
		return spec, nil, false
	}
	k.openWriter(ar, *run)
	return spec, startErr, true
}

// stoppedBeforeStart deals with a stop that reached ar's queued run after
// handoff made it active and before it started, and reports whether the
// run must not start. A cancel ends this run alone, unstarted; the runs
// queued behind it carry on. A closing kernel leaves it queued, with the
// rest, for the next start to resume. An interrupt lets it start: it ends
// interrupted at once and keeps its input in the history, as any run an
// interrupt stops does, so a well-timed interrupt loses no input.
func (k *Kernel) stoppedBeforeStart(ar *activeRun, run *session.Run) bool {
	cause := context.Cause(ar.ctx)
	switch {
	case k.checkOpen() != nil:
		return true
	case cause == nil || errors.Is(cause, errInterrupted):
		return false
	}
	k.endUnstarted(run, session.RunCancelled, nil)
	return true
}

// openWriter gives a run that has logged RUN_STARTED its event writer and
// logs the notices that waited for it.
func (k *Kernel) openWriter(ar *activeRun, run session.Run) {
	w := newEventWriter(k, context.WithoutCancel(ar.ctx), run.SessionID, run.ID)
	k.mu.Lock()
	ar.events = w
	notices := ar.notices
	ar.notices = nil
	k.mu.Unlock()
	_ = w.write(notices...) // the run has just started: it cannot have ended
}

// cancelQueue cancels run and every run queued behind ar: their session
// was closed or deleted under them.
func (k *Kernel) cancelQueue(ar *activeRun, run *session.Run) {
	k.mu.Lock()
	rest := ar.queue
	ar.queue = nil
	k.mu.Unlock()
	k.endUnstarted(run, session.RunCancelled, nil)
	for _, q := range rest {
		k.endUnstarted(&q.run, session.RunCancelled, nil)
	}
}

// endUnstarted records the end of a run that never started.
func (k *Kernel) endUnstarted(run *session.Run, state session.RunState, runErr *session.RunError) {
	run.State, run.EndedAt, run.Error = state, k.now(), runErr
	err := k.store.UpdateRun(context.WithoutCancel(k.ctx), *run)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("record unstarted run", "session", run.SessionID, "run", run.ID, "err", err)
	}
}

// cancelQueued removes a queued run from its session's queue and records
// it cancelled. It reports false when the run is not waiting in a queue
// (it has started meanwhile, or ended).
func (k *Kernel) cancelQueued(sessionID, runID string) bool {
	k.mu.Lock()
	ar := k.active[sessionID]
	var found *session.Run
	if ar != nil {
		for i, q := range ar.queue {
			if q.run.ID == runID {
				found = &q.run
				ar.queue = append(ar.queue[:i], ar.queue[i+1:]...)
				k.noticeLocked(ar, cancelledNotice(runID))
				break
			}
		}
	}
	k.mu.Unlock()
	if found == nil {
		return false
	}
	k.endUnstarted(found, session.RunCancelled, nil)
	return true
}

// runSession is the body of a session's run goroutine: it executes run,
// then each run queued behind it, until the queue is empty. started says
// whether run has already been started (by Run); a queued one is started
// here.
func (k *Kernel) runSession(ar *activeRun, run session.Run, spec agents.Spec, startErr error, started bool) {
	defer k.wg.Done()
	for ar != nil {
		if !started {
			spec, startErr, started = k.startQueued(ar, &run)
		}
		if started && k.execute(ar, &run, spec, startErr) {
			k.retire(run.SessionID, ar) // suspended: its queue waits in the store for the next start
			return
		}
		ar, run = k.handoff(ar, run)
		started = false
	}
}

// resumeQueues restarts, after recovery, the queues a stop left behind:
// for each session, its oldest queued run starts and the others wait
// behind it in order.
func (k *Kernel) resumeQueues(ctx context.Context) error {
	queued, err := k.store.ListRunsByState(ctx, session.RunQueued)
	if err != nil {
		return fmt.Errorf("list queued runs: %w", err)
	}
	bySession := map[string]*activeRun{}
	var order []string
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, run := range queued {
		if waiting := k.active[run.SessionID]; waiting != nil { // a resumed run goes first
			waiting.queue = append(waiting.queue, queuedRun{run: run})
			continue
		}
		ar := bySession[run.SessionID]
		if ar == nil {
			ar = k.newActiveRun(run.ID)
			ar.first = run
			bySession[run.SessionID], order = ar, append(order, run.SessionID)
			continue
		}
		ar.queue = append(ar.queue, queuedRun{run: run})
	}
	for _, id := range order {
		ar := bySession[id]
		k.active[id] = ar
		k.wg.Add(1)
		go k.runSession(ar, ar.first, agents.Spec{}, nil, false)
	}
	return nil
}
