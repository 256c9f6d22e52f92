package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

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

// emitError is a failure to record an event or a message.
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
	// sessionMCPHeld says the run uses its session's own MCP servers
	// (sessionmcp.go), until it ends.
	sessionMCPHeld bool
	usage          session.Usage
	turn           *turn              // the model response streaming now, if any
	pending        []session.ToolCall // tool calls recorded but not yet answered
	// clientCalls are the calls of the client's tools the run leaves for
	// the client to answer (see clienttools.go).
	clientCalls []string
	events      *eventWriter // appends the run's events in the background
	// undecided are calls whose approval was still awaited when the run
	// stopped; their requests are resolved as cancelled.
	undecided []string
	// grants are the standing approvals decisions gave during the run,
	// which the session's record may not show yet.
	grants []session.Grant
}

// execute runs the agent loop for ar on its goroutine and then stops the
// run in the one way its result calls for: it ends (runend.go), or it is
// left for whoever takes the session next to continue (runcontinue.go):
// without a word when the lease was lost, handed off when kerneld shuts
// down, paused when the store refused its writes. Its deadline counts from
// when it first started, whichever process runs it now.
func (k *Kernel) execute(h *held, ar *activeRun, run *session.Run, spec agents.Spec) {
	r := &runner{
		k: k, h: h, ar: ar, run: run, spec: spec, events: ar.events,
		log:   k.log.With("session", run.SessionID, "run", run.ID, "agent", spec.Name),
		usage: run.Usage, byModel: slices.Clone(run.ModelUsage),
	}
	started := run.StartedAt
	if started.IsZero() {
		started = k.now()
	}
	ctx, cancel := context.WithDeadlineCause(ar.ctx, started.Add(runTimeout(spec.Limits.RunTimeout)), errRunTimeout)
	defer cancel()
	defer r.releaseSessionMCP()
	ctx, span := r.startRunSpan(ctx)
	defer r.endRunSpan(span) // after the run ended or left, below
	err := stopCause(ctx, r.safeLoop(ctx))
	switch {
	case r.leaseLost(err):
		r.leave(err)
	case errors.Is(err, errHandoff) && !ar.continues && r.run.State != session.RunWaitingInput:
		r.end(errShutdown) // its agent ends what its process leaves, unless it only waits for a person
	case errors.Is(err, errHandoff):
		r.handOff()
	case errors.Is(err, errdefs.ErrUnavailable):
		r.pause(err)
	default:
		r.end(err)
	}
}

// leaseLost reports whether the run must stop without writing: the
// session's lease was lost, the store refused a write for it, or the
// session is gone.
func (r *runner) leaseLost(err error) bool {
	return errors.Is(err, errLeaseLost) || errors.Is(err, session.ErrFenced) || errors.Is(err, errdefs.ErrNotFound)
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

// loop runs the run's steps: it takes up where the run is (its start just
// logged, or what a previous process left), then makes model calls and
// the tool calls they ask for until the model answers without one, or
// max_turns.
func (r *runner) loop(ctx context.Context) error {
	if r.ar.started != nil {
		if err := r.recordStart(); err != nil {
			return err
		}
		if err := r.guardRun(ctx); err != nil {
			return err
		}
	}
	switch r.run.Kind {
	case session.RunKindCompaction:
		return r.compactOnDemand(ctx)
	case session.RunKindClear:
		return r.clearHistory(ctx)
	}
	if err := r.prepare(ctx); err != nil {
		return err
	}
	first, done, err := r.firstStep(ctx)
	if err != nil || done {
		return err
	}
	// A run that waited in a queue may find its tenant's budget spent.
	if err := r.chargeTokens(ctx, 0); err != nil {
		return err
	}
	for n := first; n < r.spec.MaxTurns; n++ {
		if err := r.atStep(ctx, n); err != nil {
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

// firstStep returns the number of the run's first model call: 0, or 1 for
// a run answering client tool calls (see continuedTurn), or where a
// continued run takes up (see resume). done says the run has nothing left
// to do but end.
func (r *runner) firstStep(ctx context.Context) (int, bool, error) {
	if r.ar.from == nil || r.ar.started != nil {
		return continuedTurn(r.run), false, nil
	}
	return r.resume(ctx)
}

// atStep is the boundary between two steps of a run, before model call n.
// A step is one model call and the tool calls it asked for. It is
// completed once its results are durable: the model call's assistant
// message in the history (its events in the log before it), then each
// tool call's result in the log and the history. A continued run takes up
// exactly what its completed steps recorded (see runcontinue.go). Here
// the run logs what others asked it to, stops if it was stopped, and, if
// its process is shutting down, leaves to be continued elsewhere.
func (r *runner) atStep(ctx context.Context, n int) error {
	if err := r.logNotices(); err != nil {
		return err
	}
	// Tool results can win the race with a stop: the stop must end the
	// run before another model call, not be found by its reads.
	if err := stopped(ctx); err != nil {
		return err
	}
	if r.ar.leaving() {
		r.log.Info("run leaves at a step boundary for another process to continue", "step", n)
		return errHandoff
	}
	return nil
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
// stop, the run must end as the stop says, never as internal. A run that
// leaves at a step boundary leaves.
func stopCause(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, errHandoff) {
		return err
	}
	if cause := stopped(ctx); cause != nil {
		return cause
	}
	return err
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

// logNotices logs the events others posted to the run since it last
// looked (see mailbox).
func (r *runner) logNotices() error { return r.emit(r.ar.notices.take()...) }

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
		if msgs[i].Role == session.RoleAssistant {
			msgs[i].Agent = r.spec.Name
		}
	}
	if err := r.k.store.AppendMessages(r.storeCtx(), r.h.token, msgs...); err != nil {
		return &emitError{err: fmt.Errorf("append messages: %w", err)}
	}
	for _, m := range msgs {
		lm, err := r.modelMessage(r.storeCtx(), m)
		if err != nil {
			return &emitError{err: err}
		}
		r.history = append(r.history, lm)
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
		evs, msg := steeredInput(r.run.ID, steer)
		err = r.emit(evs...)
		if err == nil {
			err = r.record(msg)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// steeredInput returns the events and the user message that add steer's
// input to run runID.
func steeredInput(runID string, steer session.Run) ([]session.Event, session.Message) {
	id := session.NewMessageID()
	evs := []session.Event{session.Custom(customRunSteered, map[string]string{"runId": runID, "steerRunId": steer.ID, "messageId": id})}
	if steer.ChildResult != nil {
		evs = append(evs, childResultEvent(runID, *steer.ChildResult))
	}
	return append(evs, userInputEvents(id, steer.Input, steer.Images)...),
		session.Message{ID: id, Role: session.RoleUser, Content: steer.Input, Images: steer.Images}
}

// customRunSteered announces input a steer added to the active run.
const customRunSteered = "kerneld.run.steered"

// lostSteers returns the steers recorded as joining run whose input its
// log does not show: its process died between the two. Their input joins
// the run now, oldest first, as it would have.
func (k *Kernel) lostSteers(ctx context.Context, run session.Run, rp *replayedRun) ([]session.Run, error) {
	steers, err := k.store.ListRuns(ctx, run.SessionID, session.RunQuery{States: []session.RunState{session.RunSteered}})
	if err != nil {
		return nil, fmt.Errorf("list steered runs: %w", err)
	}
	var lost []session.Run
	for i := len(steers) - 1; i >= 0; i-- {
		if steers[i].SteeredInto == run.ID && !rp.steered[steers[i].ID] {
			lost = append(lost, steers[i])
		}
	}
	return lost, nil
}
