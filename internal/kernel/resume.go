package kernel

import (
	"context"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// resumeHeld picks up what the previous owner of h's session left, when
// h's lease was just taken: runs left running end interrupted; a run left
// waiting for approvals becomes the active run again, waiting, with its
// original deadline, for the decisions still to come; a record left busy
// is freed.
func (k *Kernel) resumeHeld(h *held) error {
	ctx := context.WithoutCancel(h.ctx)
	if _, err := k.recoverRunning(ctx, h); err != nil {
		return err
	}
	runs, err := k.store.ListRuns(ctx, h.id, session.RunQuery{Limit: 1, States: []session.RunState{session.RunWaitingInput}})
	if err != nil {
		return fmt.Errorf("list waiting runs: %w", err)
	}
	if len(runs) == 0 {
		return k.freeSession(ctx, h.id)
	}
	if ar := h.current(); ar != nil && ar.run.ID == runs[0].ID {
		return nil
	}
	return k.resumeWaiting(h, runs[0])
}

// resumeWaiting makes run, waiting for approvals, h's active run again.
func (k *Kernel) resumeWaiting(h *held, run session.Run) error {
	ctx := context.WithoutCancel(h.ctx)
	s, err := k.store.GetSession(ctx, h.id)
	if err != nil {
		return fmt.Errorf("get session: %w", err)
	}
	spec, startErr := k.runnableAgent(s.Agent) // an unavailable agent ends the run as internal
	pending, err := k.pendingApprovals(ctx, run)
	if err != nil {
		return err
	}
	ar := newActiveRun(h, s, run)
	ar.resuming = true
	ar.awaiting, ar.decisions = pending, make(chan decision, len(pending))
	k.launch(h, ar, spec, startErr)
	k.control(h) // decisions made while nobody held the session
	k.log.Info("run resumed, waiting for approval", "session", run.SessionID, "run", run.ID)
	return nil
}

// pendingApprovals returns the tool calls of run still awaiting a decision.
func (k *Kernel) pendingApprovals(ctx context.Context, run session.Run) (map[string]bool, error) {
	evs, err := k.runEvents(ctx, run)
	if err != nil {
		return nil, err
	}
	pending := map[string]bool{}
	for _, a := range approvalsOf(evs, run.ID, false) {
		if a.State == ApprovalPending {
			pending[a.ToolCallID] = true
		}
	}
	return pending, nil
}

// resume rebuilds a resumed run's last turn from the log and the history:
// tool calls already answered stay answered, decided ones are carried out,
// undecided ones wait again, and calls that needed no approval but were
// cut short by the stop get an error result (running them again could
// repeat what they did). It returns how many model calls the run has made.
func (r *runner) resume(ctx context.Context) (int, error) {
	turns, calls, err := r.unanswered(ctx)
	if err != nil || len(calls) == 0 {
		return turns, err
	}
	r.pending = append(r.pending, calls...)
	evs, err := r.k.runEvents(ctx, *r.run)
	if err != nil {
		return turns, err
	}
	approvals := map[string]Approval{}
	for _, a := range approvalsOf(evs, r.run.ID, false) {
		approvals[a.ToolCallID] = a
	}
	b := r.newBatch(ctx, len(calls))
	n := len(calls)
	for _, c := range calls {
		a, asked := approvals[c.ID]
		switch {
		case asked && a.State == ApprovalPending: // reachable by Decide since resumeWaiting
			b.gated[c.ID], b.expires = c, a.ExpiresAt
		case asked && a.State == ApprovalApproved:
			b.start(c)
		case asked:
			n--
			err = r.recordResult(toolResult{call: c, content: deniedContent(a.Reason), isError: true})
		default:
			n--
			err = r.recordResult(toolResult{call: c, content: interruptedToolResult, isError: true})
		}
		if err != nil {
			b.wg.Wait()
			return turns, err
		}
	}
	return turns, b.collect(n)
}

// unanswered returns how many model calls the run made and the tool calls
// of its last one that have no result yet.
func (r *runner) unanswered(ctx context.Context) (int, []session.ToolCall, error) {
	msgs, err := r.k.store.ListMessages(ctx, r.run.SessionID, 0, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("list messages: %w", err)
	}
	turns, answered := 0, map[string]bool{}
	var last []session.ToolCall
	for _, m := range msgs {
		if m.RunID != r.run.ID {
			continue
		}
		switch m.Role {
		case session.RoleAssistant:
			turns, last = turns+1, m.ToolCalls
		case session.RoleTool:
			answered[m.ToolCallID] = true
		}
	}
	var open []session.ToolCall
	for _, c := range last {
		if !answered[c.ID] {
			open = append(open, c)
		}
	}
	return turns, open, nil
}
