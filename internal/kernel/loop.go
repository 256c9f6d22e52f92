package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools"
)

// Why a run stopped early. They are the causes of a run context's
// cancellation, so the loop can tell a cancel from a timeout or shutdown.
var (
	errCancelled     = errors.New("run cancelled")
	errSessionClosed = errors.New("session closed")
	errShutdown      = errors.New("kerneld is shutting down")
	errRunTimeout    = errors.New("run timed out")
	errMaxTurns      = errors.New("run reached max_turns")
)

// modelError is a failure reported by the model provider.
type modelError struct{ err error }

func (e *modelError) Error() string { return e.err.Error() }
func (e *modelError) Unwrap() error { return e.err }

// emitError is a failure to record an event; it fails the run as internal.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

// runner is the state of one executing run. Only the run's goroutine
// touches it, so it needs no lock.
type runner struct {
	k       *Kernel
	h       *held // the session, held by this replica
	ar      *activeRun
	run     *session.Run // the goroutine's own copy
	spec    agents.Spec
	log     *slog.Logger
	history []llm.Message // what the model sees, grown as the run goes
	// positions are the history's positions in the session, one per
	// message of history.
	positions []int64
	// summary is the latest compaction's summary, which the model sees
	// before history; "" when the session was never compacted.
	summary string
	// compactFailed stops a run whose summary failed from asking again.
	compactFailed bool
	settings      modelSettings
	byModel       []session.ModelUsage // usage per model, in order of first call
	tools         []llm.Tool
	// mcpTools are the tools of the agent's MCP servers this run may call,
	// by the name the model sees.
	mcpTools map[string]tools.Tool
	mcpDown  map[string]error // servers that could not start, by name
	usage    session.Usage
	turn     *turn              // the model response streaming now, if any
	pending  []session.ToolCall // tool calls recorded but not yet answered
	// clientCalls are the calls of the client's tools the run leaves for
	// the client to answer (see clienttools.go).
	clientCalls []string
	events      *eventWriter // appends the run's events in the background
	// undecided are calls whose approval was still awaited when the run
	// stopped; their requests are resolved as cancelled.
	undecided []string
}

// execute runs the agent loop for ar and records how it ended in *run. A
// startErr (the run is logged but could not be fully recorded) ends it at
// once as internal. A run awaiting approvals when kerneld shuts down is
// suspended instead of ended, to wait again on the next start or on
// another replica; a run whose lease was lost stops without writing.
func (k *Kernel) execute(h *held, ar *activeRun, run *session.Run, spec agents.Spec, startErr error) {
	r := &runner{
		k: k, h: h, ar: ar, run: run, spec: spec,
		log: k.log.With("session", run.SessionID, "run", run.ID, "agent", spec.Name),
	}
	r.events = ar.events
	ctx, cancel := context.WithTimeoutCause(ar.ctx, runTimeout(spec.Limits.RunTimeout), errRunTimeout)
	defer cancel()
	err := startErr
	if err == nil {
		err = r.safeLoop(ctx)
	}
	err = stopCause(ctx, err)
	switch {
	case r.leaseLost(err):
		_ = r.events.close() // its appends fail: nothing more is written
		r.log.Warn("run stopped without writing: another replica may own the session now")
	case errors.Is(err, errSuspended):
		if err := r.events.close(); err != nil {
			r.log.Error("suspend run", "err", err)
		}
		h.mu.Lock()
		ar.suspended = true
		h.mu.Unlock()
		r.log.Info("run suspended while waiting for approval")
	default:
		r.finish(err)
	}
}

// leaseLost reports whether the run must stop without writing: the
// session's lease was lost, or the store refused a write for it.
func (r *runner) leaseLost(err error) bool {
	return errors.Is(err, errLeaseLost) || errors.Is(err, session.ErrFenced)
}

// safeLoop runs the loop, turning a panic into an internal failure so one
// bad run cannot take the daemon down.
func (r *runner) safeLoop(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("run panicked: %v", p)
		}
	}()
	return r.loop(ctx)
}

func (r *runner) loop(ctx context.Context) error {
	if r.run.Kind == session.RunKindCompaction {
		return r.compactOnDemand(ctx)
	}
	if err := r.prepare(ctx); err != nil {
		return err
	}
	first := continuedTurn(r.run)
	if r.ar.resuming {
		n, err := r.resume(ctx)
		if err != nil {
			return err
		}
		first = n
	}
	// A run that waited in a queue may find its tenant's budget spent.
	if err := r.chargeTokens(ctx, 0); err != nil {
		return err
	}
	for n := first; n < r.spec.MaxTurns; n++ {
		// Tool results can win the race with a stop: the stop must end
		// the run before another model call, not be found by its reads.
		if err := stopped(ctx); err != nil {
			return err
		}
		calls, err := r.modelTurn(ctx, n)
		if err != nil {
			return err
		}
		calls, clients := r.splitClientCalls(calls)
		if len(calls) > 0 {
			if err := r.callTools(ctx, calls); err != nil {
				return err
			}
		}
		if len(clients) > 0 || len(calls) == 0 {
			return nil // done, or the client runs its tools and answers in its next run
		}
	}
	return errMaxTurns
}

// modelTurn streams one model call, emitting its events, and records the
// assistant message. It returns the tool calls the model made.
func (r *runner) modelTurn(ctx context.Context, n int) ([]session.ToolCall, error) {
	if err := r.foldSteers(); err != nil {
		return nil, err
	}
	if err := r.maybeCompact(ctx); err != nil {
		return nil, err
	}
	req, err := r.request(ctx, n)
	if err != nil {
		return nil, err
	}
	r.turn = newTurn()
	err = r.spec.Provider.Stream(ctx, req, func(c llm.Chunk) error {
		if evs := r.turn.apply(c); len(evs) > 0 {
			return r.emit(evs...)
		}
		return nil
	})
	if err != nil {
		return nil, r.streamFailure(ctx, err)
	}
	if err := r.emit(r.turn.close()...); err != nil {
		return nil, err
	}
	r.addUsage(req.Model, r.turn.usage)
	msg, ok := r.turn.message()
	spent := r.turn.usage.InputTokens + r.turn.usage.OutputTokens
	r.turn = nil
	if ok {
		if err := r.record(msg); err != nil {
			return nil, err
		}
	}
	// The turn is recorded whole; a spent budget stops the run before its
	// tools or its next model call.
	if err := r.chargeTokens(ctx, spent); err != nil {
		return nil, err
	}
	return msg.ToolCalls, nil
}

// stopped returns why ctx was stopped (cancel, interrupt, timeout,
// shutdown), or nil while it runs.
func stopped(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// stopCause returns err, the loop's result, unless the run was stopped:
// then it returns the stop's cause. A stopped run's store reads fail too
// (SQLite honours the cancelled context), and whatever failed after the
// stop, the run must end as the stop says, never as internal. A
// suspended run stays suspended.
func stopCause(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, errSuspended) {
		return err
	}
	if cause := stopped(ctx); cause != nil {
		return cause
	}
	return err
}

// streamFailure classifies an error from a provider's Stream.
func (r *runner) streamFailure(ctx context.Context, err error) error {
	if ee, ok := errors.AsType[*emitError](err); ok {
		return ee
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return &modelError{err: err}
}

// emit queues events of this run for the log (see eventWriter). Store
// writes are not cancelled with the run: a cancelled run must still record
// how it ended.
func (r *runner) emit(evs ...session.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := r.events.write(evs...); err != nil {
		return &emitError{err: err}
	}
	return nil
}

func (r *runner) storeCtx() context.Context { return context.WithoutCancel(r.ar.ctx) }

// record appends messages to the history. The events that carried them
// are made durable first, so the history never holds what the log lacks,
// and a tool never runs before its call is in the log.
func (r *runner) record(msgs ...session.Message) error {
	if _, err := r.events.flush(); err != nil {
		return &emitError{err: err}
	}
	now := r.k.now().UTC()
	for i := range msgs {
		msgs[i].SessionID, msgs[i].RunID, msgs[i].CreatedAt = r.run.SessionID, r.run.ID, now
	}
	if err := r.k.store.AppendMessages(r.storeCtx(), r.h.token, msgs...); err != nil {
		return &emitError{err: fmt.Errorf("append messages: %w", err)}
	}
	for _, m := range msgs {
		r.history = append(r.history, toLLM(m))
		r.positions = append(r.positions, m.Position)
		if m.Role == session.RoleAssistant {
			r.pending = append(r.pending, m.ToolCalls...)
		}
	}
	return nil
}

// answered forgets a pending tool call once its result is recorded.
func (r *runner) answered(callID string) {
	for i, c := range r.pending {
		if c.ID == callID {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			return
		}
	}
}

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
	if me, ok := errors.AsType[*modelError](err); ok {
		return failed(session.ErrorCodeModel, me.Error(), session.RunFailed)
	}
	return failed(session.ErrorCodeInternal, "internal error", session.RunFailed)
}

// finish closes everything the run opened, answers dangling tool calls,
// announces the steers that arrived too late to join it, emits the
// terminal event and records the run's new state. It runs on every exit
// path but a lost lease.
func (r *runner) finish(err error) {
	end := r.endingFor(err)
	if end.runErr != nil && end.runErr.Code == session.ErrorCodeInternal {
		r.log.Error("run failed", "err", err)
	}
	r.ar.ending.Store(true)
	evs, msgs := r.closeOpen()
	evs = append(evs, r.lateSteers()...)
	evs = append(evs, end.event)
	if err := r.events.writeLast(evs...); err != nil {
		r.log.Error("record run end", "err", err)
	}
	endSeq, err := r.events.flush()
	if err != nil {
		r.log.Error("record run end", "err", err)
	}
	if len(msgs) > 0 {
		if err := r.record(msgs...); err != nil {
			r.log.Error("record dangling tool calls", "err", err)
		}
	}
	_ = r.events.close() // flushed above; its error is logged there
	switch {
	case r.leaseLost(err):
	case err != nil:
		r.repair()
	default:
		r.recordEnd(end, endSeq)
	}
}

// The waits between a repair's attempts: doubling from the first to the
// last.
const (
	firstRepairWait = 50 * time.Millisecond
	lastRepairWait  = 5 * time.Second
)

// repair ends a run whose events the store stopped taking (it was
// unreachable, or its disk was full) as recovery ends one a crash left:
// once the store answers again, what the run opened is closed, its
// dangling tool calls are answered from the log, and it ends interrupted.
// The events the store acknowledged stay as they are. It tries again until
// that is done, the lease is lost (the new owner recovers the run) or the
// kernel closes (its next start does).
func (r *runner) repair() {
	r.log.Error("the store failed mid-run: the run ends interrupted once the store answers again")
	r.k.awaitingStore(r.h, r.ar)
	wait := firstRepairWait
	for {
		err := r.repairOnce()
		switch {
		case err == nil:
			r.log.Info("run ended after a store failure", "state", session.RunInterrupted)
			return
		case r.leaseLost(err), errors.Is(err, errdefs.ErrNotFound):
			return
		}
		r.log.Warn("end the run after a store failure", "err", err, "retry_in", wait)
		select {
		case <-r.h.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, lastRepairWait)
	}
}

// repairOnce ends the run from its stored record and its log.
func (r *runner) repairOnce() error {
	ctx := r.storeCtx()
	stored, err := r.k.store.GetRun(ctx, r.run.SessionID, r.run.ID)
	if err != nil {
		return err
	}
	if stored.State.Terminal() {
		return nil
	}
	if err := r.k.recoverRun(ctx, r.h.token, stored, storeFailedMessage); err != nil {
		return err
	}
	*r.run, err = r.k.store.GetRun(ctx, r.run.SessionID, r.run.ID)
	return err
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
	if err := r.k.saveRun(r.storeCtx(), run); err != nil {
		r.log.Error("record run end", "err", err)
	}
	r.log.Info("run ended", "state", run.State, "duration", now.Sub(run.StartedAt).Round(time.Millisecond))
}

// foldSteers adds the inputs of the steers handed to the run as user
// messages, announced by kerneld.run.steered, before its next model call.
// Each steer's own run is marked steered into this one first, so it can
// never also run on its own; a steer cancelled meanwhile is left out.
func (r *runner) foldSteers() error {
	r.h.mu.Lock()
	steers := r.ar.steers
	r.ar.steers = nil
	r.h.mu.Unlock()
	for _, steer := range steers {
		err := r.k.updateRun(r.storeCtx(), &steer, func(cur *session.Run) error {
			if cur.State != session.RunQueued {
				return errUnchanged
			}
			cur.SteeredInto = r.run.ID
			return cur.Transition(session.RunSteered, r.k.now())
		})
		if err != nil {
			return &emitError{err: err}
		}
		if steer.State != session.RunSteered {
			continue
		}
		id := session.NewMessageID()
		err = r.emit(
			session.Custom("kerneld.run.steered", map[string]string{"runId": r.run.ID, "steerRunId": steer.ID, "messageId": id}),
			session.TextMessageStart(id, session.RoleUser),
			session.TextMessageContent(id, steer.Input),
			session.TextMessageEnd(id),
		)
		if err == nil {
			err = r.record(session.Message{ID: id, Role: session.RoleUser, Content: steer.Input})
		}
		if err != nil {
			return err
		}
	}
	return nil
}
