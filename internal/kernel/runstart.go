package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/session"
)

// Starting a run. A run begins on this process in one of two ways, both
// through startRun, which logs its start, and launch, which gives it its
// goroutine:
//
//   - startNew: a request finds its session idle and starts its run at
//     once, taking the session's lease;
//   - startQueued: the session's driver starts the next queued run.
//
// (A run continued from what another process left is taken up in
// runcontinue.go; only one that never logged its start goes through
// startRun there.)
//
// startRun either logs the start or does nothing: when it fails, nothing
// is in the log and the run is as it was, or ended failed if it could not
// be put back. Once RUN_STARTED is in the log the run must end there too,
// so what remains of the start (the start seq on the record, the input in
// the history) is recorded by the run's own goroutine (recordStart), where
// a failure is the run's, like any other.

// startRecord is what a freshly started run's goroutine records first.
type startRecord struct {
	inputID string // the message id of the echoed input
}

// newRun returns the record of a new run of session sessionID for req.
func (k *Kernel) newRun(sessionID string, req RunRequest, state session.RunState) session.Run {
	run := session.Run{
		ID: cmp.Or(req.ID, session.NewID()), SessionID: sessionID, State: state, Input: req.Input,
		IdempotencyKey: req.IdempotencyKey, CreatedAt: k.now(),
	}
	run.UserMessageID, run.Context, run.AgentState = req.AGUI.UserMessageID, req.AGUI.Context, req.AGUI.AgentState
	run.ClientTools, run.ToolResults = req.AGUI.ClientTools, req.AGUI.ToolResults
	run.Overrides, run.Kind = req.Overrides.Clone(), req.kind
	run.TraceParent = req.traceParent
	run.Source, run.Background, run.ChildResult = req.Source, req.background, req.childResult
	run.Agent = req.Agent
	if run.ChildResult != nil {
		run.Source = session.RunSourceChildResult
	}
	return run
}

// startNew starts req on session s, idle, whose lease h this request just
// took, and hands the session to a new driver.
func (k *Kernel) startNew(ctx context.Context, h *held, s session.Session, spec agents.Spec, req RunRequest) (session.Run, bool, error) {
	admitted, err := k.quotas.AdmitStart(ctx, s.Tenant) // a concurrent run's place; see admit.go
	if err != nil {
		k.owner.release(h)
		return session.Run{}, false, err
	}
	run := k.newRun(s.ID, req, session.RunRunning)
	run.StartedAt = run.CreatedAt
	run.Model = k.modelOf(spec, s, run)
	if err := k.store.CreateRun(ctx, run, k.runConstraints(0)); err != nil {
		admitted(false)
		k.owner.release(h)
		return k.duplicate(err)
	}
	ar, err := k.startRun(ctx, h, s, spec, run)
	if err != nil {
		admitted(false)
		k.owner.release(h)
		return session.Run{}, false, err
	}
	k.launch(h, ar, spec, true)
	admitted(true)
	k.owner.start(h)
	return ar.run, false, nil
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
		k.endQueued(h, run, session.RunCancelled, nil)
		return false
	}
	spec, err := k.specOf(s, run)
	if err != nil {
		k.endQueued(h, run, session.RunFailed, &session.RunError{Code: session.ErrorCodeInternal, Message: err.Error()})
		return false
	}
	run.Model = k.modelOf(spec, s, run)
	admitted, ok := k.admitStart(h, s.Tenant, run)
	if !ok {
		return false
	}
	ar, err := k.startRun(ctx, h, s, spec, run)
	if err != nil {
		if admitted != nil {
			admitted(false)
		}
		if !errors.Is(err, session.ErrStale) {
			k.log.Error("start run", "session", h.id, "run", run.ID, "err", err)
		}
		return false // cancelled meanwhile, or the store failed: the run stays as recorded
	}
	k.launch(h, ar, spec, admitted != nil)
	if admitted != nil {
		admitted(true)
	}
	return true
}

// startRun records run r as started on the session s that h holds: the
// run (created as running, or moved from queued), the session (running,
// naming the run), and in the log RUN_STARTED with the echoed input. It
// returns the run, ready to launch. When it fails nothing was logged: a
// queued run cancelled meanwhile is left as it is (session.ErrStale), any
// other run ends failed.
func (k *Kernel) startRun(ctx context.Context, h *held, s session.Session, spec agents.Spec, r session.Run) (*activeRun, error) {
	if r.State == session.RunQueued {
		if err := k.markStarted(ctx, &r); err != nil {
			return nil, err
		}
	}
	prev := s.State
	changed, askTitle, err := k.markSessionRunning(ctx, s.ID, spec, r)
	if err != nil {
		k.endFailedStart(h, prev, r)
		return nil, err
	}
	ar := newActiveRun(h, s, r, spec.Continues())
	ar.started = &startRecord{inputID: cmp.Or(r.UserMessageID, session.NewMessageID())}
	evs := append(startEvents(r, ar.started.inputID), changed...)
	if err := k.emit(ctx, h.token, s.ID, r.ID, evs...); err != nil {
		k.endFailedStart(h, prev, r)
		return nil, err
	}
	ar.run.StartSeq = evs[0].Seq
	ar.logged = evs[len(evs)-1].Seq
	if askTitle {
		k.generateTitle(ar, spec)
	}
	return ar, nil
}

// markStarted moves r, queued, to running in the store, unless a cancel
// got there first (session.ErrStale).
func (k *Kernel) markStarted(ctx context.Context, r *session.Run) error {
	model := r.Model
	return k.updateRun(ctx, r, func(cur *session.Run) error {
		if cur.State != session.RunQueued || cur.CancelRequested {
			return session.ErrStale // cancelled meanwhile: the driver looks again
		}
		cur.Model = model
		return cur.Transition(session.RunRunning, k.now())
	})
}

// markSessionRunning records on session id that r runs now, and returns
// the events that say its model changed or it was titled, if it was, and
// whether a model is to title it (see titleAtStart).
func (k *Kernel) markSessionRunning(ctx context.Context, id string, spec agents.Spec, r session.Run) (changed []session.Event, askTitle bool, err error) {
	var titled []session.Event
	var tenant string
	err = k.updateSession(ctx, id, func(s *session.Session) error {
		tenant = s.Tenant
		if err := s.Transition(session.StateRunning, r.StartedAt); err != nil {
			return err
		}
		if r.Kind == "" {
			changed, s.Model = modelChanged(*s, r.ID, r.Model), r.Model
		}
		titled, askTitle = k.titleAtStart(s, spec, r)
		s.ActiveRunID = r.ID
		s.ExpiresAt = time.Time{} // a busy session does not expire; its TTL restarts when it is free
		if r.AgentState != nil {
			s.AgentState = r.AgentState
		}
		return nil
	})
	if err == nil && len(titled) > 0 {
		k.feedChanged(tenant, id, FeedSessionTitled)
	}
	return append(changed, titled...), askTitle, err
}

// startEvents returns the events that open run r: RUN_STARTED, the state
// the client gave it, the results of the client's tool calls it answers,
// and its input echoed as the user message inputID.
func startEvents(r session.Run, inputID string) []session.Event {
	evs := []session.Event{session.RunStarted(r.SessionID, r.ID)}
	if r.Model != "" {
		evs[0] = evs[0].WithMeta("model", r.Model)
	}
	if r.Agent != "" {
		evs[0] = evs[0].WithMeta("agent", r.Agent)
	}
	if r.AgentState != nil {
		evs = append(evs, session.StateSnapshot(r.AgentState))
	}
	evs = append(evs, toolResultEvents(&r)...)
	if r.ChildResult != nil {
		evs = append(evs, childResultEvent(r.ID, *r.ChildResult))
	}
	if r.Kind == "" && r.Input != "" {
		evs = append(evs,
			session.TextMessageStart(inputID, session.RoleUser),
			session.TextMessageContent(inputID, r.Input),
			session.TextMessageEnd(inputID),
		)
	}
	return evs
}

// launch makes ar, whose start (or continuation) is in the log up to
// ar.logged, h's active run and runs it on a goroutine of its own.
// admitted says the run's admission holds its concurrent place already;
// otherwise it is counted now.
func (k *Kernel) launch(h *held, ar *activeRun, spec agents.Spec, admitted bool) {
	ar.events = newEventWriter(k, ar, h, ar.logged, writerPolicy{prompt: true, mergeDeltas: spec.Stream.MergeDeltas})
	h.mu.Lock()
	h.active = ar
	h.mu.Unlock()
	if k.checkOpen() != nil {
		ar.stopForShutdown() // Drain may have looked before h had this run
	}
	k.changes.notify(h.id)
	if !admitted {
		k.quotas.RunStarted(ar.tenant)
	}
	k.wg.Go(func() {
		defer close(ar.done)
		defer ar.cancel(nil)
		defer k.quotas.RunEnded(ar.tenant)
		run := ar.run
		k.execute(h, ar, &run, spec)
	})
}

// recordStart records the rest of a fresh run's start, first thing on its
// goroutine: its start seq on the record, then the results of the
// client's tool calls it answers and its input in the history, where the
// model reads them.
func (r *runner) recordStart() error {
	if err := r.k.saveRun(r.storeCtx(), r.run); err != nil {
		return &emitError{err: err}
	}
	if r.run.Kind != "" {
		return nil // a compaction run has no input
	}
	msgs := toolResultMessages(r.run)
	if r.run.Input != "" {
		msgs = append(msgs, session.Message{ID: r.ar.started.inputID, SessionID: r.run.SessionID, RunID: r.run.ID,
			Role: session.RoleUser, Content: r.run.Input, CreatedAt: r.run.StartedAt})
	}
	if err := r.k.store.AppendMessages(r.storeCtx(), r.h.token, msgs...); err != nil {
		return &emitError{err: fmt.Errorf("append message: %w", err)}
	}
	return nil
}
