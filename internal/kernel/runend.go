package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Ending a run. A run that started ends once, in the log (RUN_FINISHED or
// RUN_ERROR, after whatever closes what it opened) and then on its
// record, in one of these ways:
//
//   - end: the run's goroutine ends it, on every exit path of its loop
//     but those that leave it to be continued (runcontinue.go);
//   - endLeft: whoever takes a session ends a run its previous process
//     left unfinished, when it must not be continued (its agent says
//     on_crash: interrupt, it reached max_resumes, its agent is gone),
//     or records the end a run logged but did not record;
//   - endQueued: a queued run that never started ends with no events;
//
// Then the session's driver moves the session on (runStopped): the next
// queued run starts, or the session settles into completed or error.

// ending is how a run ended: its terminal event and the states it leaves.
type ending struct {
	event        session.Event
	runState     session.RunState
	sessionState session.State
	runErr       *session.RunError
}

// endingFor maps the loop's result to how the run ends.
func (r *runner) endingFor(err error) ending {
	sid, rid, u := r.run.SessionID, r.run.ID, r.usage
	finished := func(o session.Outcome, reason string, rs session.RunState) ending {
		return ending{session.RunFinished(sid, rid, o, reason, u, r.byModel...), rs, session.StateCompleted, nil}
	}
	failed := func(code, msg string, rs session.RunState) ending {
		return ending{session.RunErrored(code, msg, u, r.byModel...), rs, session.StateError, &session.RunError{Code: code, Message: msg}}
	}
	switch {
	case err == nil && len(r.clientCalls) > 0:
		return ending{session.RunFinishedPending(sid, rid, r.clientCalls, u, r.byModel...), session.RunSucceeded, session.StateCompleted, nil}
	case err == nil:
		return finished(session.OutcomeSuccess, "", session.RunSucceeded)
	case errors.Is(err, errCancelled), errors.Is(err, errSessionClosed):
		return finished(session.OutcomeCancelled, session.ReasonCancelled, session.RunCancelled)
	case errors.Is(err, errInterrupted):
		return finished(session.OutcomeCancelled, session.ReasonInterrupted, session.RunInterrupted)
	case errors.Is(err, errShutdown):
		return failed(session.ErrorCodeInterrupted, "the run was interrupted because kerneld shut down", session.RunInterrupted)
	case errors.Is(err, errRunTimeout):
		return failed(session.ErrorCodeTimeout, fmt.Sprintf("the run exceeded its run_timeout of %s", runTimeout(r.spec.Limits.RunTimeout)), session.RunFailed)
	case errors.Is(err, errMaxTurns):
		return failed(session.ErrorCodeMaxTurns, fmt.Sprintf("the run reached max_turns (%d model calls)", r.spec.MaxTurns), session.RunFailed)
	}
	if code, msg, ok := quotaEnding(err); ok {
		return failed(code, msg, session.RunFailed)
	}
	if code, msg, ok := guardEnding(err); ok {
		return failed(code, msg, session.RunFailed)
	}
	if me, ok := errors.AsType[*modelError](err); ok {
		return failed(session.ErrorCodeModel, me.Error(), session.RunFailed)
	}
	return failed(session.ErrorCodeInternal, "internal error", session.RunFailed)
}

// end closes everything the run opened, answers dangling tool calls, logs
// the notices others posted and the steers that arrived too late to join
// it, emits the terminal event and records the run's new state. A run
// whose end the store refuses to log is paused instead: its end is not in
// the log, so it is not over, and it goes on once the store answers.
func (r *runner) end(err error) {
	end := r.endingFor(err)
	if end.runErr != nil && end.runErr.Code == session.ErrorCodeInternal {
		r.log.Error("run failed", "err", err)
	}
	r.ar.ending.Store(true)
	evs, msgs := r.closeOpen()
	evs = append(evs, r.ar.notices.close()...)
	evs = append(evs, r.lateSteers()...)
	evs = append(evs, end.event)
	if err := r.events.writeLast(evs...); err != nil {
		r.stopUnended(err)
		return
	}
	endSeq, err := r.events.flush()
	if err != nil {
		r.stopUnended(err)
		return
	}
	r.ar.endLogged.Store(true)
	if len(msgs) > 0 {
		if err := r.record(msgs...); err != nil {
			r.log.Error("record dangling tool calls", "err", err) // whoever takes the session records them from the log
		}
	}
	_ = r.events.close() // flushed above
	r.recordEnd(end, endSeq)
}

// stopUnended stops a run whose end could not be logged: with nothing
// written, when its lease was lost; paused, when the store failed.
func (r *runner) stopUnended(err error) {
	if r.leaseLost(err) {
		r.leave(err)
		return
	}
	r.pause(err)
}

// lateSteers returns the queued notices of the steers handed to the run
// that it never folded in: they run on their own, in their place in the
// queue.
func (r *runner) lateSteers() []session.Event {
	r.h.mu.Lock()
	steers := r.ar.steers
	r.ar.steers = nil
	r.h.mu.Unlock()
	evs := make([]session.Event, len(steers))
	for i, run := range steers {
		evs[i] = queuedNotice(run.ID, i+1)
	}
	return evs
}

// closeOpen returns the events and messages that close a run stopped
// mid-way: *_END for open streams, then a synthetic error result for every
// tool call that has no result.
func (r *runner) closeOpen() ([]session.Event, []session.Message) {
	var evs []session.Event
	var msgs []session.Message
	if r.turn != nil {
		evs = r.turn.close()
		r.addUsage(r.settings.Model, r.turn.usage)
		if m, ok := r.turn.message(); ok {
			msgs = append(msgs, m)
			r.pending = append(r.pending, m.ToolCalls...)
		}
		r.turn = nil
	}
	for _, id := range r.undecided {
		evs = append(evs, resolvedEvent(id, "cancel", "the run ended before a decision"))
	}
	r.undecided = nil
	for _, c := range r.pending {
		id := session.NewMessageID()
		const content = "error: the run ended before this tool call returned"
		evs = append(evs, session.ToolCallResult(id, c.ID, content, true))
		msgs = append(msgs, session.Message{ID: id, Role: session.RoleTool, Content: content, ToolCallID: c.ID, IsError: true})
	}
	r.pending = nil
	return evs, msgs
}

// recordEnd stores the run's end. Its session is moved on by the
// session's driver, which knows whether a queued run takes over.
func (r *runner) recordEnd(end ending, endSeq int64) {
	now := r.k.now().UTC()
	run := r.run
	if err := run.Transition(end.runState, now); err != nil {
		r.log.Error("record run end", "err", err)
	}
	run.Error, run.Usage, run.EndSeq = end.runErr, r.usage, endSeq
	run.ModelUsage = r.byModel
	if err := r.k.saveRun(r.storeCtx(), run); err != nil {
		r.log.Error("record run end", "err", err) // whoever takes the session records it from the log
	}
	r.ar.stop = runEnded
	r.log.Info("run ended", "state", run.State, "duration", now.Sub(run.StartedAt).Round(time.Millisecond))
}

// endLeft ends run r, which a process that stopped left unfinished,
// without continuing it, under the lease token: whatever it opened is
// closed, its dangling tool calls get error results, the messages its log
// holds but the history lacks are recorded, and it ends with RUN_ERROR
// code and message; its session goes to error and is freed. A run whose
// end is in the log already only has that end recorded.
func (k *Kernel) endLeft(ctx context.Context, token int64, r session.Run, code, message string) error {
	evs, err := k.runEvents(ctx, r)
	if err != nil {
		return err
	}
	rp := replayRun(evs)
	msgs, err := k.missingMessages(ctx, r, rp.messages())
	if err != nil {
		return err
	}
	end := ending{sessionState: session.StateError, runState: session.RunInterrupted,
		runErr: &session.RunError{Code: code, Message: message}}
	if last := rp.terminal; last != nil {
		end = endingOf(last) // it ended in the log; only its records are behind
	} else if len(evs) > 0 {
		closing, results := rp.closers()
		msgs = append(msgs, results...)
		closing = append(closing, session.RunErrored(code, message, r.Usage, r.ModelUsage...))
		if err := k.emit(ctx, token, r.SessionID, r.ID, closing...); err != nil {
			return err
		}
		rp.endSeq = closing[len(closing)-1].Seq
	}
	if err := k.appendRecovered(ctx, token, r, msgs); err != nil {
		return err
	}
	return k.recordLeftEnd(ctx, r, end, rp.endSeq)
}

// recordLeftEnd stores the end of a run its process left, and frees its
// session.
func (k *Kernel) recordLeftEnd(ctx context.Context, r session.Run, end ending, endSeq int64) error {
	now := k.now().UTC()
	err := k.updateRun(ctx, &r, func(cur *session.Run) error {
		cur.State, cur.EndedAt, cur.Error, cur.EndSeq, cur.Handoff = end.runState, now, end.runErr, endSeq, ""
		return nil
	})
	if err != nil {
		return err
	}
	err = k.updateSession(ctx, r.SessionID, func(s *session.Session) error {
		if s.ActiveRunID == r.ID {
			s.ActiveRunID = ""
		}
		if s.State != session.StateClosed {
			s.State, s.UpdatedAt = end.sessionState, now
		}
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // deleted meanwhile: nothing left to free
	}
	return err
}

// endingOf reads how a run ended from its terminal event.
func endingOf(ev *session.Event) ending {
	if ev.Type == session.EventRunError {
		code, msg := ev.Member("code"), ev.Member("message")
		rs := session.RunFailed
		if code == session.ErrorCodeInterrupted || code == session.ErrorCodeResumeLimit {
			rs = session.RunInterrupted
		}
		return ending{runState: rs, sessionState: session.StateError, runErr: &session.RunError{Code: code, Message: msg}}
	}
	outcome, _ := ev.Fields()["outcome"].(map[string]any)
	if outcome["type"] != string(session.OutcomeCancelled) {
		return ending{runState: session.RunSucceeded, sessionState: session.StateCompleted}
	}
	if metaReason(ev) == session.ReasonInterrupted {
		return ending{runState: session.RunInterrupted, sessionState: session.StateCompleted}
	}
	return ending{runState: session.RunCancelled, sessionState: session.StateCompleted}
}

// endQueued records the end of a queued run that never started, if it is
// still queued; a run cancelled meanwhile stays as it is. Its end is
// announced (run.cancelled, run.failed) ahead of the record, as a started
// run's is ahead of its terminal event (see announceEvents).
func (k *Kernel) endQueued(h *held, run session.Run, state session.RunState, runErr *session.RunError) {
	h.mu.Lock()
	h.interruptedAtStart(run) // an interrupter that never starts interrupts nothing more
	h.mu.Unlock()
	ctx := context.WithoutCancel(h.ctx)
	announced := false
	err := k.updateRun(ctx, &run, func(r *session.Run) error {
		if r.State != session.RunQueued {
			return errUnchanged
		}
		r.State, r.EndedAt, r.Error = state, k.now(), runErr
		announced = k.announceRunEnded(ctx, *r) || announced
		return nil
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("record unstarted run", "session", run.SessionID, "run", run.ID, "err", err)
	}
	if announced {
		k.announcer.Notify()
	}
	k.changes.notify(h.id)
}

// runStopped forgets h's active run, ar, once its goroutine stopped, and
// moves the session on. An ended run makes way for the next queued one,
// or the session settles: its state tells how the run went. A run that
// left is another process's to continue; a paused one stays the
// session's active run until the store lets it go on (see runcontinue.go).
func (k *Kernel) runStopped(h *held, ar *activeRun) {
	if ar.stop == runPaused {
		k.continuePaused(h, ar)
		return
	}
	h.mu.Lock()
	h.active = nil
	h.mu.Unlock()
	run, err := k.store.GetRun(context.WithoutCancel(h.ctx), h.id, ar.run.ID)
	if err != nil {
		run = ar.run
	}
	if afterRunEnded != nil {
		afterRunEnded(run)
	}
	k.changes.notify(h.id)
	if ar.stop == runLeft {
		return
	}
	k.childEnded(context.WithoutCancel(h.ctx), run) // before the session settles: see childEnded
	if h.ctx.Err() == nil && k.startNext(h) {
		return // the session stays running, under its next run
	}
	k.settle(h, run)
}

// settle records on h's session that its last run, ended, is over and
// nothing runs next: its state tells how the run went, and its TTL starts
// again.
func (k *Kernel) settle(h *held, ended session.Run) {
	now := k.now().UTC()
	err := k.updateSession(context.WithoutCancel(h.ctx), h.id, func(s *session.Session) error {
		return settledState(s, ended, now)
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.log.Error("record session state", "session", h.id, "run", ended.ID, "err", err)
	}
	k.changes.notify(h.id)
}

// settledState moves s on from its ended run, through its state machine:
// its state tells how the run went, and its TTL starts again, since a
// session expires after being idle that long, not after its run started.
func settledState(s *session.Session, ended session.Run, now time.Time) error {
	if s.ActiveRunID == ended.ID {
		s.ActiveRunID = ""
	}
	s.ExpiresAt = time.Time{}
	if s.State == session.StateClosed {
		return nil
	}
	s.ExpiresAt = expiry(now, s.TTL)
	if s.State != session.StateRunning && s.State != session.StateWaitingInput {
		return nil // ended never started, so the state still tells of the run before it
	}
	return s.Transition(idleState(ended), now)
}

// idleState is the state a session's last run leaves it in: error when the
// run failed or kerneld stopped under it, completed otherwise.
func idleState(ended session.Run) session.State {
	if ended.Error != nil {
		return session.StateError
	}
	return session.StateCompleted
}
