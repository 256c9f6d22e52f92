package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
// startRun writes the whole start in one store write (StartRun): the
// run's record, the session's, RUN_STARTED with the echoed input in the
// log and the input in the history, so a crash leaves all of it or none
// of it, and a run's start costs one commit rather than five.

// startRecord is what a freshly started run's goroutine records first.
type startRecord struct {
	inputID string // the message id of the echoed input
	// recorded says StartRun wrote the whole start, the run's history
	// included: there is nothing left to record.
	recorded bool
}

// newRun returns the record of a new run of session sessionID for req.
func (k *Kernel) newRun(sessionID string, req RunRequest, state session.RunState) session.Run {
	run := session.Run{
		ID: cmp.Or(req.ID, session.NewID()), SessionID: sessionID, State: state, Input: req.Input,
		IdempotencyKey: req.IdempotencyKey, CreatedAt: k.now(),
	}
	run.UserMessageID, run.Context, run.AgentState = req.AGUI.UserMessageID, req.AGUI.Context, req.AGUI.AgentState
	run.ClientTools, run.ToolResults = req.AGUI.ClientTools, req.AGUI.ToolResults
	run.Overrides, run.Kind, run.ClearMemory = req.Overrides.Clone(), req.kind, req.clearMemory
	run.TraceParent = req.traceParent
	run.Images = req.imageRefs
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
	c := k.runConstraints(0)
	ar, err := k.startRun(ctx, h, s, spec, run, &c)
	if err != nil {
		admitted(false)
		k.owner.release(h)
		return k.duplicate(err)
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
	ar, err := k.startRun(ctx, h, s, spec, run, nil)
	if err != nil {
		if admitted != nil {
			admitted(false)
		}
		if errors.Is(err, session.ErrStale) || errors.Is(err, session.ErrFenced) || h.ctx.Err() != nil {
			return false // cancelled meanwhile, or the session's lease lost: the run stays as recorded
		}
		// Nothing of its start was written: it ends failed, rather than be
		// tried again and again.
		k.log.Error("start run", "session", h.id, "run", run.ID, "err", err)
		k.endQueued(h, run, session.RunFailed, &session.RunError{Code: session.ErrorCodeInternal, Message: "the run could not be started"})
		return false
	}
	k.launch(h, ar, spec, admitted != nil)
	if admitted != nil {
		admitted(true)
	}
	return true
}

// startRun records run r as started on the session s that h holds, in
// one write (see startWrite): the run (created as running under c, when
// c is set, or moved from queued), the session (running, naming the
// run), RUN_STARTED with the echoed input in the log, and the input in
// the history. It returns the run, ready to launch. When it fails nothing
// was written: a queued run cancelled meanwhile is left as it is
// (session.ErrStale), as is any other.
func (k *Kernel) startRun(ctx context.Context, h *held, s session.Session, spec agents.Spec, r session.Run, c *session.RunConstraints) (*activeRun, error) {
	if r.State == session.RunQueued {
		if err := k.markStarted(&r); err != nil {
			return nil, err
		}
	}
	for try := 1; ; try++ {
		ar, err := k.startWrite(ctx, h, s, spec, r, c)
		if err == nil && c != nil && try == 1 {
			// accept found the session idle, with no unfinished run, and
			// nothing started a run since it read the session (that would
			// have moved its version): this run is the only one, and
			// the driver need not look for others (see queueEmpty).
			h.nothingLeft.Store(true)
			h.emptyAt.Store(0)
		}
		if !errors.Is(err, session.ErrStale) {
			return ar, err
		}
		// Another writer moved the session or the run since they were
		// read: read them again and start from there.
		if s, err = k.store.GetSession(ctx, s.ID); err != nil {
			return nil, fmt.Errorf("get session: %w", err)
		}
		if c == nil {
			if r, err = k.restart(ctx, r); err != nil {
				return nil, err
			}
		}
	}
}

// restart returns run r, about to start, as stored now with the changes
// markStarted makes, unless a cancel got there first (session.ErrStale).
func (k *Kernel) restart(ctx context.Context, r session.Run) (session.Run, error) {
	cur, err := k.store.GetRun(ctx, r.SessionID, r.ID)
	if err != nil {
		return session.Run{}, fmt.Errorf("get run: %w", err)
	}
	if cur.State != session.RunQueued {
		return session.Run{}, session.ErrStale // cancelled meanwhile: the driver looks again
	}
	cur.Model = r.Model
	return cur, k.markStarted(&cur)
}

// startWrite is one attempt of startRun: it makes the run's start from
// the session s and run r as read, and writes it with StartRun.
func (k *Kernel) startWrite(ctx context.Context, h *held, s session.Session, spec agents.Spec, r session.Run, c *session.RunConstraints) (*activeRun, error) {
	changed, askTitle, titled, err := k.markSessionRunning(&s, spec, r)
	if err != nil {
		return nil, err
	}
	ar := newActiveRun(h, s, r, spec.Continues())
	ar.started = &startRecord{inputID: cmp.Or(r.UserMessageID, session.NewMessageID()), recorded: true}
	st := &session.RunStart{Run: r, Create: c != nil, Session: s,
		Events: append(startEvents(r, ar.started.inputID), changed...), Messages: startMessages(r, ar.started.inputID)}
	if c != nil {
		st.Constraints = *c
	}
	now := k.now()
	for i := range st.Events {
		st.Events[i].SessionID, st.Events[i].RunID, st.Events[i].Time = s.ID, r.ID, now
	}
	announced := k.announceEvents(ctx, st.Events)
	if err := k.store.StartRun(ctx, h.token, st); err != nil {
		if errors.Is(err, session.ErrFenced) {
			k.owner.fenced.Add(1)
		}
		return nil, err
	}
	k.changes.notify(s.ID)
	k.observe(st.Events)
	if announced {
		k.announcer.Notify()
	}
	if titled {
		k.feedChanged(s.Tenant, s.ID, FeedSessionTitled)
	}
	if c == nil {
		ar.run.Version++
	}
	ar.run.StartSeq = st.Events[0].Seq
	ar.logged = st.Events[len(st.Events)-1].Seq
	if askTitle {
		k.generateTitle(ar, spec)
	}
	return ar, nil
}

// markStarted moves r, queued, to running, as StartRun is to store it.
func (k *Kernel) markStarted(r *session.Run) error {
	if r.CancelRequested {
		return session.ErrStale // cancelled meanwhile: the driver looks again
	}
	return r.Transition(session.RunRunning, k.now())
}

// markSessionRunning makes s say that r runs now, and returns the events
// that say its model changed or it was titled, if it was, whether a model
// is to title it (see titleAtStart), and whether it was titled.
func (k *Kernel) markSessionRunning(s *session.Session, spec agents.Spec, r session.Run) (changed []session.Event, askTitle, titled bool, err error) {
	if err := s.Transition(session.StateRunning, r.StartedAt); err != nil {
		return nil, false, false, err
	}
	if r.Kind == "" {
		changed, s.Model = modelChanged(*s, r.ID, r.Model), r.Model
	}
	titledEvs, askTitle := k.titleAtStart(s, spec, r)
	s.ActiveRunID = r.ID
	s.ExpiresAt = time.Time{} // a busy session does not expire; its TTL restarts when it is free
	state := unsentState(s, r)
	if r.AgentState != nil {
		s.AgentState = r.AgentState
	}
	return slices.Concat(changed, state, titledEvs), askTitle, len(titledEvs) > 0, nil
}

// startMessages returns what run r adds to the history as it starts: the
// results of the client's tool calls it answers and its input, as the
// message inputID.
func startMessages(r session.Run, inputID string) []session.Message {
	if r.Kind != "" {
		return nil // a compaction run has no input
	}
	msgs := toolResultMessages(&r)
	if r.Input != "" || len(r.Images) > 0 {
		msgs = append(msgs, session.Message{ID: inputID, SessionID: r.SessionID, RunID: r.ID,
			Role: session.RoleUser, Content: r.Input, Images: r.Images, CreatedAt: r.StartedAt})
	}
	return msgs
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
	if postedByKerneld(r.Source) {
		// A client sees who posted the input it is about to show: kerneld
		// itself, not the person reading.
		evs[0] = evs[0].WithMeta("source", r.Source)
	}
	if r.AgentState != nil {
		evs = append(evs, session.StateSnapshot(r.AgentState))
	}
	evs = append(evs, toolResultEvents(&r)...)
	if r.ChildResult != nil {
		evs = append(evs, childResultEvent(r.ID, *r.ChildResult))
	}
	if r.Kind == "" && (r.Input != "" || len(r.Images) > 0) {
		evs = append(evs, userInputEvents(inputID, r.Input, r.Images)...)
	}
	return evs
}

// postedByKerneld reports whether a run of source was posted by kerneld
// itself (a schedule's firing, a background child's answer) rather than by
// a client.
func postedByKerneld(source string) bool {
	return source == session.RunSourceSchedule || source == session.RunSourceChildResult
}

// launch makes ar, whose start (or continuation) is in the log up to
// ar.logged, h's active run and runs it on a goroutine of its own.
// admitted says the run's admission holds its concurrent place already;
// otherwise it is counted now.
func (k *Kernel) launch(h *held, ar *activeRun, spec agents.Spec, admitted bool) {
	ar.events = newEventWriter(k, ar, h, ar.logged, writerPolicy{prompt: true, mergeDeltas: spec.Stream.MergeDeltas})
	h.mu.Lock()
	h.active = ar
	interrupted := h.interruptedAtStart(ar.run)
	h.mu.Unlock()
	if interrupted {
		ar.cancel(errInterrupted) // it starts, to keep its input, and stops at once
	}
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

// recordStart records the rest of a run's start, first thing on its
// goroutine, when its start was logged without it (a run continued whose
// start never reached the log): its start seq on the record, then the
// results of the client's tool calls it answers and its input in the
// history, where the model reads them.
func (r *runner) recordStart() error {
	if r.ar.started.recorded {
		return nil // StartRun wrote all of it
	}
	if err := r.k.saveRun(r.storeCtx(), r.run); err != nil {
		return &emitError{err: err}
	}
	if err := r.k.store.AppendMessages(r.storeCtx(), r.h.token, startMessages(*r.run, r.ar.started.inputID)...); err != nil {
		return &emitError{err: fmt.Errorf("append message: %w", err)}
	}
	return nil
}
