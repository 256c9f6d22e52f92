package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Continuing a run. A run is a sequence of steps (see atStep in loop.go).
// When the process running a run stops before the run ends (it was
// killed, its replica was lost, it shut down, the store refused its
// writes for longer than the lease TTL), the run is not over: whoever
// takes its session next continues it from its last completed step,
// under the same run id, the seq going on.
//
//  1. Leaving (leave, handOff, pause: the run's goroutine). A process
//     that stops in an orderly way says why on the run's record
//     (Handoff) and lets the lease go at once; one that dies says
//     nothing, and its lease expires.
//  2. Taking up (takeUp: the session's new driver). What the previous
//     process opened is closed in the log as recovery closes it; the
//     model call it cut short is dropped, and its partial text never
//     reaches the model as if it were complete; CUSTOM
//     kerneld.run.resumed says from which step, why, and which messages
//     were cut; the run's record counts the resume.
//  3. Going on (resume: the run's new goroutine). The tool calls of the
//     last recorded model call that have no result are answered: one
//     waiting for approval waits again; a spawn_agent call follows the
//     child it had started, which goes on by itself; one cut mid-way is
//     made again if its tool is safe to retry (retrySafe), else it gets an
//     error result saying it may or may not have taken effect. Then the
//     next model call is made.
//
// Beyond its log and history the run records only its resume counts, why
// it was let go, and its usage so far. An agent with on_crash: interrupt
// has its left runs ended interrupted instead, and a run its process died
// under more than max_resumes times ends interrupted with code
// resume_limit.

// continuation is what a run's new goroutine takes up.
type continuation struct {
	reason string // why it was continued: a session.Resume value
	step   int    // the model calls it had recorded
}

// errHandoff stops a run whose process is shutting down: it stops at its
// next step boundary, or where it is once the drain budget is spent, and
// is continued by whoever takes the session.
var errHandoff = errors.New("the run was handed off: kerneld is shutting down")

// leave stops the run without writing anything more: the session's lease
// was lost (the store fenced an append, or could not renew the lease for
// a whole TTL), so another process may own the session now.
func (r *runner) leave(err error) {
	_ = r.events.close() // its appends fail: nothing more is written
	r.ar.stop = runLeft
	// The store may have fenced an append before the renewal noticed: the
	// session's driver must not start anything more either.
	r.h.stop(errLeaseLost)
	r.log.Warn("run stopped without writing: another replica may own the session now", "err", err)
}

// handOff stops the run for another process to continue: what it has
// streamed is made durable, its record says it was handed off at
// shutdown, and the session's driver lets the lease go and tells the
// other replicas.
func (r *runner) handOff() {
	if _, err := r.events.flush(); err != nil && r.leaseLost(err) {
		r.leave(err)
		return
	}
	_ = r.events.close()
	err := r.k.updateRun(r.storeCtx(), r.run, func(cur *session.Run) error {
		if cur.State.Terminal() {
			return errUnchanged
		}
		cur.Handoff = session.ResumeShutdown
		return nil
	})
	if err != nil {
		r.log.Warn("record the hand-off", "err", err) // it continues as after a crash
	}
	r.ar.stop = runLeft
	r.log.Info("run handed off for another process to continue", "state", r.run.State)
}

// pause stops a run whose writes the store refused for longer than the
// lease TTL: the session's driver continues it once the store answers
// again, here unless the lease is lost meanwhile. Until then its session
// refuses what would need the store (see outage.go).
func (r *runner) pause(err error) {
	_ = r.events.close()
	r.ar.paused.Store(true)
	r.ar.stop = runPaused
	r.k.changes.notify(r.h.id)
	r.log.Error("the store failed mid-run: the run pauses until the store takes writes again", "err", err)
}

// continueLeft takes up what the session's previous owner left, when h's
// lease was just taken: a run left running or waiting for approvals is
// continued (or ended, when it must not be); a record left busy is freed.
// A store failure is retried until the lease is lost or the kernel closes.
func (k *Kernel) continueLeft(h *held) {
	ctx := context.WithoutCancel(h.ctx)
	for wait := firstRetryWait; ; wait = min(2*wait, lastRetryWait) {
		err := k.continueLeftOnce(ctx, h)
		if err == nil || errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, session.ErrFenced) {
			return
		}
		k.log.Error("continue the run left by the session's previous owner", "session", h.id, "err", err, "retry_in", wait)
		if sleep(h.ctx, wait) != nil {
			return
		}
	}
}

// The waits between attempts to continue a run after a store failure:
// doubling from the first to the last.
const (
	firstRetryWait = 50 * time.Millisecond
	lastRetryWait  = 5 * time.Second
)

func (k *Kernel) continueLeftOnce(ctx context.Context, h *held) error {
	if h.nothingLeft.Load() {
		return nil // startNew started the session's only unfinished run
	}
	runs, err := k.store.ListRuns(ctx, h.id, session.RunQuery{
		States: []session.RunState{session.RunRunning, session.RunWaitingInput}})
	if err != nil {
		return fmt.Errorf("list unfinished runs: %w", err)
	}
	tookUp := false
	for i := len(runs) - 1; i >= 0; i-- { // oldest first; one, unless a crash left a record behind
		if ar := h.current(); ar != nil && ar.run.ID == runs[i].ID {
			continue // started or continued here just now
		}
		if err := k.takeUp(ctx, h, runs[i], h.leftBy); err != nil {
			return fmt.Errorf("continue run %s: %w", runs[i].ID, err)
		}
		tookUp = true
	}
	switch {
	case h.current() == nil:
		return k.freeSession(ctx, h.id)
	case tookUp:
		k.control(h) // cancels and decisions made while nobody held the session
	}
	return nil
}

// continuePaused continues h's active run, ar, paused by a store failure,
// once the store takes writes again: it tries again, with growing waits,
// until it has, or the session's lease is lost, or the kernel closes.
func (k *Kernel) continuePaused(h *held, ar *activeRun) {
	ctx := context.WithoutCancel(h.ctx)
	for wait := firstRetryWait; ; wait = min(2*wait, lastRetryWait) {
		if sleep(h.ctx, wait) != nil {
			h.mu.Lock()
			h.active = nil
			h.mu.Unlock()
			return
		}
		run, err := k.store.GetRun(ctx, h.id, ar.run.ID)
		if err == nil {
			err = k.takeUp(ctx, h, run, session.ResumeStoreOutage)
		}
		if err == nil || errors.Is(err, errdefs.ErrNotFound) {
			k.log.Info("run continued after the store answered again", "session", h.id, "run", ar.run.ID)
			if h.current() == ar { // it was ended, not continued
				h.mu.Lock()
				h.active = nil
				h.mu.Unlock()
			}
			return
		}
		k.log.Warn("continue a run paused by the store", "session", h.id, "run", ar.run.ID, "err", err, "retry_in", wait)
	}
}

// endLeftChild ends run as endLeft does, and, for a background child's
// run, then posts its end to the parent as its own driver would have.
func (k *Kernel) endLeftChild(ctx context.Context, h *held, run session.Run, code, message string) error {
	if err := k.endLeft(ctx, h.token, run, code, message); err != nil || !run.Background {
		return err
	}
	if ended, err := k.store.GetRun(ctx, run.SessionID, run.ID); err == nil {
		k.childEnded(context.WithoutCancel(h.ctx), ended)
	}
	return nil
}

// takeUp continues run, which a process that stopped left unfinished, as
// h's active run, or ends it if it must not be continued (see endLeft).
// reason says why it was left, unless its record says better.
func (k *Kernel) takeUp(ctx context.Context, h *held, run session.Run, reason string) error {
	s, err := k.store.GetSession(ctx, h.id)
	if err != nil {
		return fmt.Errorf("get session: %w", err)
	}
	evs, err := k.runEvents(ctx, run)
	if err != nil {
		return err
	}
	rp := replayRun(evs)
	reason = cmp.Or(run.Handoff, reason)
	crash := crashResume(run, reason)
	spec, agentErr := k.specOf(s, run)
	switch {
	case rp.terminal != nil:
		return k.endLeftChild(ctx, h, run, "", "") // only its record is behind its log
	case agentErr != nil:
		return k.endLeftChild(ctx, h, run, session.ErrorCodeInterrupted, interruptedMessage+"; its agent is not available")
	case !spec.Continues() && run.State != session.RunWaitingInput, // one waiting for a person waits again
		seedsFork(run): // a fork's first run only writes the fork's history: there is nothing to go on with
		return k.endLeftChild(ctx, h, run, session.ErrorCodeInterrupted, interruptedMessage)
	case crash && run.Crashes >= spec.MaxResumes:
		k.log.Warn("run not continued: its process died under it too often", "session", h.id, "run", run.ID,
			"crashes", run.Crashes+1, "max_resumes", spec.MaxResumes)
		return k.endLeftChild(ctx, h, run, session.ErrorCodeResumeLimit, fmt.Sprintf(
			"the run was interrupted: kerneld stopped under it %d times, more than its agent's max_resumes (%d)",
			run.Crashes+1, spec.MaxResumes))
	}
	// A crash is counted before anything is logged: a process that dies
	// while continuing the run counts against max_resumes too. Any other
	// resume is counted once its continuation is logged: a store that
	// takes small updates but no appends (a disk nearly full) must not
	// count a resume for every attempt that could not log one.
	if crash {
		if err := k.countResume(ctx, &run, crash, rp.startSeq); err != nil {
			return err
		}
	}
	ar, err := k.logContinuation(ctx, h, s, spec, run, rp, reason)
	if err != nil {
		return err
	}
	if !crash {
		if err := k.countResume(ctx, &run, crash, rp.startSeq); err != nil {
			return err
		}
		ar.run.Resumes, ar.run.Handoff = run.Resumes, run.Handoff
	}
	if err := k.markContinued(ctx, h, run); err != nil {
		return err
	}
	k.launch(h, ar, spec, false) // admitted when it was posted; see admit.go
	k.log.Info("run continued", "session", h.id, "run", run.ID, "step", ar.from.step, "reason", reason)
	return nil
}

// seedsFork reports whether run is a fork's first run, which writes the
// history the fork keeps (see fork.go): the one run with neither input,
// nor results of client tool calls, nor a kind.
func seedsFork(run session.Run) bool {
	return run.Input == "" && run.Kind == "" && len(run.ToolResults) == 0
}

// crashResume reports whether continuing run for reason counts against
// its agent's max_resumes: its process died under it while it was
// running. A graceful hand-off or a store outage is not the run's doing,
// and a run waiting for a person's decision was not running anything.
func crashResume(run session.Run, reason string) bool {
	return (reason == session.ResumeCrash || reason == session.ResumeTakeover) && run.State == session.RunRunning
}

// logContinuation logs what continues run: the events that close what its
// previous process opened, the results of the tool calls the cut model
// call made (never run), kerneld.run.resumed, and, for a run whose start
// never reached the log, its start. It records in the history what the
// log holds of completed steps but the history lacks, and returns the run
// ready to launch.
func (k *Kernel) logContinuation(ctx context.Context, h *held, s session.Session, spec agents.Spec, run session.Run,
	rp *replayedRun, reason string) (*activeRun, error) {
	history, err := k.store.ListMessages(ctx, run.SessionID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	left := rp.leftOpen(run.ID, history)
	ar := newActiveRun(h, s, run, spec.Continues())
	ar.from = &continuation{reason: reason, step: left.step}
	var evs []session.Event
	if rp.events == 0 { // it never logged its start: log it now, as a fresh run does
		ar.started = &startRecord{inputID: cmp.Or(run.UserMessageID, session.NewMessageID())}
		evs = startEvents(run, ar.started.inputID)
	}
	evs = append(evs, left.closing...)
	steered, err := k.lostSteers(ctx, run, rp)
	if err != nil {
		return nil, err
	}
	for _, steer := range steered {
		sevs, msg := steeredInput(run.ID, steer)
		evs, left.record = append(evs, sevs...), append(left.record, msg)
	}
	evs = append(evs, session.RunResumed(run.ID, left.step, reason, left.cut, left.cutCall))
	if err := k.emit(ctx, h.token, run.SessionID, run.ID, evs...); err != nil {
		return nil, err
	}
	if ar.started != nil {
		ar.run.StartSeq = evs[0].Seq
	}
	ar.logged = evs[len(evs)-1].Seq
	if err := k.appendRecovered(ctx, h.token, run, left.record); err != nil {
		return nil, err
	}
	if run.State == session.RunWaitingInput {
		pending, err := k.pendingApprovals(ctx, run)
		if err != nil {
			return nil, err
		}
		ar.awaiting, ar.decisions = pending, make(chan decision, len(pending))
	}
	return ar, nil
}

// countResume counts a resume on run's record and clears why it was let
// go; run ends as stored. startSeq is the seq of the run's RUN_STARTED,
// which a crash may have kept from the record.
func (k *Kernel) countResume(ctx context.Context, run *session.Run, crash bool, startSeq int64) error {
	return k.updateRun(ctx, run, func(cur *session.Run) error {
		cur.Resumes++
		if crash {
			cur.Crashes++
		}
		cur.Handoff, cur.StartSeq = "", cmp.Or(cur.StartSeq, startSeq)
		return nil
	})
}

// markContinued names run as its session's active run again, running or
// waiting for approvals.
func (k *Kernel) markContinued(ctx context.Context, h *held, run session.Run) error {
	state := session.StateRunning
	if run.State == session.RunWaitingInput {
		state = session.StateWaitingInput
	}
	return k.updateSession(ctx, h.id, func(s *session.Session) error {
		if s.State == session.StateClosed || (s.State == state && s.ActiveRunID == run.ID) {
			return errUnchanged
		}
		s.State, s.ActiveRunID, s.ExpiresAt, s.UpdatedAt = state, run.ID, time.Time{}, k.now().UTC()
		return nil
	})
}

// mayHaveRun answers a tool call that a stopping process cut off and that
// is not safe to make again.
const mayHaveRun = "error: kerneld stopped while this tool call was running, so it may or may not have taken effect; " +
	"it was not made again. Check before relying on it, or ask."

// resume takes up a continued run on its new goroutine: it answers the
// tool calls of the run's last recorded model call that have no result
// yet, and returns the number of the next model call. done says the run's
// answer was complete already: only its end was missing.
func (r *runner) resume(ctx context.Context) (int, bool, error) {
	msgs, err := r.k.store.ListMessages(ctx, r.run.SessionID, 0, 0)
	if err != nil {
		return 0, false, fmt.Errorf("list messages: %w", err)
	}
	step, last, answered := recordedSteps(msgs, r.run.ID)
	var open []session.ToolCall
	if last != nil {
		for _, c := range last.ToolCalls {
			if !answered[c.ID] {
				open = append(open, c)
			}
		}
	}
	if err := r.recheckRun(ctx, open); err != nil {
		return step, false, err
	}
	if last == nil {
		return step, false, nil
	}
	if len(last.ToolCalls) == 0 {
		return step, true, nil
	}
	calls, clients := r.splitClientCalls(open)
	if err := r.answerLeftCalls(ctx, calls); err != nil {
		return step, false, err
	}
	return step, len(clients) > 0, nil
}

// answerLeftCalls answers the tool calls the previous process left
// without a result: decided ones as decided, undecided ones once decided,
// ones the guard denied as denied, one needing an approval never asked
// for once asked, and one cut mid-way by making it again when that is
// safe, else with mayHaveRun. The agent's guard is asked again about
// every call before it is asked for or made again, as about a new one.
func (r *runner) answerLeftCalls(ctx context.Context, calls []session.ToolCall) error {
	if len(calls) == 0 {
		return nil
	}
	r.pending = append(r.pending, calls...)
	evs, err := r.k.runEvents(ctx, *r.run)
	if err != nil {
		return err
	}
	approvals := map[string]Approval{}
	for _, a := range approvalsOf(evs, r.run.ID, false) {
		approvals[a.ToolCallID] = a
	}
	denials := guardDenials(evs, r.run.ID)
	children := replayRun(evs).children
	b := r.newBatch(ctx, len(calls))
	var waiting, ask, again []session.ToolCall
	approved := map[string]bool{}
	n := len(calls)
	for _, c := range calls {
		a, asked := approvals[c.ID]
		ref, _ := r.spec.Tool(c.Name)
		child := children[c.ID]
		denial, guardDenied := denials[c.ID]
		switch {
		case asked && a.State == ApprovalPending:
			waiting, b.expires[c.ID] = append(waiting, c), a.ExpiresAt
		case asked && a.State != ApprovalApproved:
			n--
			err = r.recordResult(toolResult{call: c, content: deniedContent(a.Reason), isError: true})
		case guardDenied:
			n--
			err = r.recordResult(toolResult{call: c, content: denial, isError: true})
		case !asked && ref.RequireApproval:
			ask = append(ask, c)
		case child != nil && child.ended:
			n--
			err = r.recordResult(childResult(c, child))
		case child != nil:
			b.startWith(func(ctx context.Context) toolResult { return r.rejoinChild(ctx, c, child) })
		case r.retrySafe(c):
			again, approved[c.ID] = append(again, c), asked
		default:
			n--
			err = r.recordResult(toolResult{call: c, content: mayHaveRun, isError: true})
		}
		if err != nil {
			b.wg.Wait()
			return err
		}
	}
	if len(waiting) > 0 {
		// They wait again, whether or not the previous process recorded
		// the run as waiting before it stopped.
		b.await(waiting)
		if err := r.setWaiting(true); err != nil {
			b.wg.Wait()
			return err
		}
	}
	if err := b.guardLeft(ask, again, approved); err != nil {
		b.wg.Wait()
		return err
	}
	return b.collect(n)
}

// guardLeft asks the guard about the left calls that are to be asked for
// (ask) or made again (again), then has each asked for or made as its
// guard decided. A call a person approved before the process stopped is
// not asked for again when the guard says ask.
func (b *toolBatch) guardLeft(ask, again []session.ToolCall, approved map[string]bool) error {
	guarded, err := b.r.guardCalls(b.ctx, append(ask, again...))
	if err != nil {
		return err
	}
	var guardAsks, gated []session.ToolCall
	for i, g := range guarded {
		c := g.call
		switch {
		case g.denied != "":
			b.startWith(func(context.Context) toolResult { return toolResult{call: c, content: g.denied, isError: true} })
		case g.ask && !approved[c.ID]:
			guardAsks = append(guardAsks, c)
		case i < len(ask):
			gated = append(gated, c)
		default:
			b.start(c)
		}
	}
	gated, err = b.approveWithoutAsking(gated)
	if err == nil {
		err = b.requestApprovals(append(guardAsks, gated...))
	}
	return err
}
