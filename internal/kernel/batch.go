package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kerneld/kerneld/internal/session"
)

// toolBatch runs the tool calls of one model turn: those that need no
// approval at once, in parallel (bounded), the others once a person
// approves them. Its collect loop, on the run's goroutine, records every
// result as it arrives and every decision as it is made.
type toolBatch struct {
	r       *runner
	ctx     context.Context
	results chan toolResult
	sem     chan struct{}
	wg      sync.WaitGroup
	gated   map[string]session.ToolCall // awaiting a decision
	// expires says when each gated call is denied undecided: when its
	// request, in the log, says, whoever continues the run.
	expires map[string]time.Time
	waits   map[string]trace.Span // the gated calls' approval waits
}

func (r *runner) newBatch(ctx context.Context, calls int) *toolBatch {
	return &toolBatch{r: r, ctx: ctx, results: make(chan toolResult, calls),
		sem: make(chan struct{}, r.k.limits.ToolConcurrency), gated: map[string]session.ToolCall{}, expires: map[string]time.Time{},
		waits: map[string]trace.Span{}}
}

// callTools runs a turn's tool calls and records their results. When the
// run is cancelled meanwhile, calls that had not answered are left
// pending for finish to close.
func (r *runner) callTools(ctx context.Context, calls []session.ToolCall) error {
	guarded, err := r.guardCalls(ctx, calls)
	if err != nil {
		return err
	}
	b := r.newBatch(ctx, len(calls))
	// A guard's "ask" is the operator's policy: no permission mode or
	// standing approval answers it in a person's place.
	var guardAsks, gated []session.ToolCall
	for _, g := range guarded {
		c := g.call
		ref, _ := r.spec.Tool(c.Name)
		switch {
		case g.denied != "":
			b.startWith(func(context.Context) toolResult { return toolResult{call: c, content: g.denied, isError: true} })
		case g.ask:
			guardAsks = append(guardAsks, c)
		case ref.RequireApproval:
			gated = append(gated, c)
		default:
			b.start(c)
		}
	}
	gated, err = b.approveWithoutAsking(gated)
	if err == nil {
		err = b.requestApprovals(append(guardAsks, gated...))
	}
	if err != nil {
		b.wg.Wait()
		return err
	}
	return b.collect(len(calls))
}

// start runs call c in its own goroutine, owned by the batch.
func (b *toolBatch) start(c session.ToolCall) {
	b.startWith(func(ctx context.Context) toolResult { return b.r.callTool(ctx, c) })
}

// startWith runs call, which answers a tool call, in its own goroutine,
// owned by the batch.
func (b *toolBatch) startWith(call func(context.Context) toolResult) {
	b.wg.Go(func() {
		b.sem <- struct{}{}
		defer func() { <-b.sem }()
		b.results <- call(b.ctx)
	})
}

// requestApprovals makes each gated call decidable, logs a request for
// each, durably, and moves the run and its session to waiting_input. The
// calls await decisions before their requests are logged, so a decision
// made the moment a client sees a request reaches the run; Decide accepts
// a decision only for a request that is in the log.
func (b *toolBatch) requestApprovals(gated []session.ToolCall) error {
	if len(gated) == 0 {
		return nil
	}
	expires := b.r.k.now().Add(b.r.spec.ApprovalTimeout)
	evs := make([]session.Event, len(gated))
	for i, c := range gated {
		evs[i] = requestedEvent(c, expires)
		b.expires[c.ID] = expires
	}
	b.await(gated)
	if err := b.r.emit(evs...); err != nil {
		return err
	}
	if _, err := b.r.events.flush(); err != nil {
		return &emitError{err: err}
	}
	return b.r.setWaiting(true)
}

// await makes gated reachable by decisions, beside the calls the run
// awaits already (a continued run's earlier requests): their decisions,
// and those already handed over, still reach it.
func (b *toolBatch) await(gated []session.ToolCall) {
	h, ar := b.r.h, b.r.ar
	h.mu.Lock()
	defer h.mu.Unlock()
	awaiting := make(map[string]bool, len(ar.awaiting)+len(gated))
	maps.Copy(awaiting, ar.awaiting)
	for _, c := range gated {
		awaiting[c.ID], b.gated[c.ID] = true, c
	}
	decisions := make(chan decision, len(awaiting)+len(ar.decisions))
	for len(ar.decisions) > 0 {
		decisions <- <-ar.decisions
	}
	ar.awaiting, ar.decisions = awaiting, decisions
}

// collect records n results: of calls running and of calls decided, or
// denied when their approval expires. It returns once all are recorded,
// or when the run is stopped. Meanwhile it logs what others post to the
// run, before each result, so that a call's own notices (a spawned
// child's start and end) precede its result. Asked to leave, it lets the
// running calls finish, then leaves the undecided ones waiting for
// whoever continues the run.
func (b *toolBatch) collect(n int) error {
	for id, c := range b.gated {
		b.waits[id] = b.r.startWaitSpan(b.ctx, c)
	}
	defer b.endWaits("left") // by a run that stopped or left before a decision
	timer := time.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	expired := b.armExpiry(timer)
	decisions := b.r.decisionsChan()
	var err error
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	leave := b.r.ar.leave
	for n > 0 {
		if leave == nil && n == len(b.gated) {
			return b.leave(err)
		}
		select {
		case res := <-b.results:
			if res.isError && b.ctx.Err() != nil {
				return b.stop() // a call failing as its run stops was cut, not answered
			}
			n--
			keep(b.r.logNotices())
			keep(b.r.recordResult(res))
		case d := <-decisions:
			n -= b.decide(d, keep)
		case <-expired:
			n -= b.expire(keep)
			expired = b.armExpiry(timer)
		case <-b.r.ar.notices.wake:
			keep(b.r.logNotices())
		case <-leave:
			leave = nil // from now on, leave once only undecided calls are left
		case <-b.ctx.Done():
			return b.stop()
		}
	}
	b.wg.Wait()
	return err
}

// leave stops a batch whose run leaves, its process shutting down, once
// only calls awaiting a person's decision are left: they wait again under
// whoever continues the run.
func (b *toolBatch) leave(err error) error {
	b.wg.Wait()
	b.r.forget()
	if err != nil {
		return err
	}
	return errHandoff
}

// decide applies a person's decision; it returns 1 when that produced the
// call's result (a denial), 0 when the call now runs.
func (b *toolBatch) decide(d decision, keep func(error)) int {
	c, ok := b.gated[d.toolCallID]
	if !ok {
		return 0
	}
	delete(b.gated, c.ID)
	verdict := DecisionDeny
	defer func() { b.endWait(c.ID, verdict) }()
	if d.approve {
		verdict = DecisionApprove
	}
	keep(b.r.emit(resolvedEvent(c.ID, verdict, d.reason)))
	if d.approve && d.always {
		g := grantOf(c, d.sameArguments, b.r.run.Agent)
		b.r.grants = append(b.r.grants, g)
		b.applyGrant(g, keep)
	}
	if len(b.gated) == 0 {
		keep(b.r.setWaiting(false))
	}
	if d.approve {
		b.start(c)
		return 0
	}
	keep(b.r.recordResult(toolResult{call: c, content: deniedContent(d.reason), isError: true}))
	return 1
}

// armExpiry sets timer to fire when the first approval still awaited
// expires, by the kernel's clock, and returns its channel; nil when no
// call awaits a decision.
func (b *toolBatch) armExpiry(timer *time.Timer) <-chan time.Time {
	if len(b.gated) == 0 {
		return nil
	}
	var first time.Time
	for id := range b.gated {
		if e := b.expires[id]; first.IsZero() || e.Before(first) {
			first = e
		}
	}
	timer.Reset(first.Sub(b.r.k.now()))
	return timer.C
}

// expire denies the calls whose approval has expired and returns how
// many; the others go on waiting until theirs does.
func (b *toolBatch) expire(keep func(error)) int {
	reason := fmt.Sprintf("no decision within %s", b.r.spec.ApprovalTimeout)
	now := b.r.k.now()
	var due []session.ToolCall
	for id, c := range b.gated {
		if !b.expires[id].After(now) {
			due = append(due, c)
		}
	}
	if len(due) == 0 {
		return 0 // a call decided meanwhile was the first to expire
	}
	b.r.forget(due...)
	for _, c := range due {
		delete(b.gated, c.ID)
		b.endWait(c.ID, "expired")
		keep(b.r.emit(resolvedEvent(c.ID, DecisionDeny, reason)))
		keep(b.r.recordResult(toolResult{call: c, content: deniedContent(reason), isError: true}))
	}
	if len(b.gated) == 0 {
		keep(b.r.setWaiting(false))
	}
	return len(due)
}

// stop ends the batch of a stopped run: running calls finish (they see
// the cancelled context), and those that succeeded are recorded. The
// undecided calls are left to the run's end, which resolves them, unless
// the run leaves to be continued elsewhere: then they wait again there.
func (b *toolBatch) stop() error {
	b.wg.Wait()
	for len(b.results) > 0 {
		if res := <-b.results; !res.isError {
			_ = b.r.recordResult(res) // the run is stopping; a store failure shows there
		}
	}
	cause := context.Cause(b.ctx)
	shutdown := errors.Is(cause, errHandoff) || errors.Is(cause, errShutdown)
	if shutdown && len(b.gated) > 0 {
		// Waiting for a person is no work to cut: whatever the agent says
		// of runs its process leaves, this one waits again where it goes on.
		b.r.forget()
		return errHandoff
	}
	for id := range b.gated {
		b.r.undecided = append(b.r.undecided, id)
	}
	b.r.forget()
	return cause
}

// endWait ends the approval wait of call id, if it has one, with outcome.
func (b *toolBatch) endWait(id, outcome string) {
	if span, ok := b.waits[id]; ok {
		delete(b.waits, id)
		endWaitSpan(span, outcome)
	}
}

// endWaits ends every approval wait still open with outcome.
func (b *toolBatch) endWaits(outcome string) {
	for id := range b.waits {
		b.endWait(id, outcome)
	}
}

// decisionsChan returns the channel the session's driver hands this run's
// decisions on.
func (r *runner) decisionsChan() chan decision {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.ar.decisions
}

// forget makes calls, or, without any, all of the run's undecided calls,
// unreachable by decisions.
func (r *runner) forget(calls ...session.ToolCall) {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	if len(calls) == 0 {
		r.ar.awaiting = nil
		return
	}
	for _, c := range calls {
		delete(r.ar.awaiting, c.ID)
	}
}

// setWaiting moves the run and its session to waiting_input, or back to
// running.
func (r *runner) setWaiting(on bool) error {
	rs, ss := session.RunRunning, session.StateRunning
	if on {
		rs, ss = session.RunWaitingInput, session.StateWaitingInput
	}
	if r.run.State == rs {
		return nil
	}
	ctx, now := r.storeCtx(), r.k.now()
	if err := r.run.Transition(rs, now); err != nil {
		return err
	}
	if err := r.k.saveRun(ctx, r.run); err != nil {
		return &emitError{err: err}
	}
	err := r.k.updateSession(ctx, r.run.SessionID, func(s *session.Session) error {
		if s.State == session.StateClosed {
			return errUnchanged
		}
		s.State, s.UpdatedAt = ss, now
		return nil
	})
	if err == nil && on {
		// A decision may have been made before the driver knew the call
		// awaited one: have it look.
		r.h.poke()
	}
	return err
}
