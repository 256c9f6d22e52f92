package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Approval decisions and states.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	// DecisionAlways approves the call and the tool's later calls in the
	// session (see Verdict).
	DecisionAlways = "always"

	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalCancelled = "cancelled" // the run ended before a decision
)

// Approval is a tool call that needed a person's decision, and that
// decision. It is read from the run's events: the log is its only store,
// which is how a pending approval outlives a restart.
type Approval struct {
	ToolCallID  string
	ToolName    string
	Arguments   json.RawMessage
	State       string
	Reason      string
	RequestedAt time.Time
	ExpiresAt   time.Time
	DecidedAt   time.Time // zero while pending
	RequestSeq  int64     // the seq of its request in the log
}

// decision is a person's answer to one approval, on its way to the run.
type decision struct {
	toolCallID string
	approve    bool
	reason     string
	// always and sameArguments make an approval standing (see Verdict).
	always, sameArguments bool
}

// Decide approves or denies a tool call that run runID is waiting on. The
// decision is recorded on the run, where its owner, on this replica or
// another, picks it up at once: an approved call runs, a denied one
// returns "denied: <reason>" to the model. A request can be decided the
// moment it is in the log, even before the run has recorded that it waits,
// and while a run handed off at shutdown waits for a replica to continue it.
// Deciding twice, or on a run that has ended, is a conflict.
func (k *Kernel) Decide(ctx context.Context, sessionID, runID, toolCallID string, approve bool, reason string) (Approval, error) {
	v := Verdict{Decision: DecisionDeny, Reason: reason}
	if approve {
		v.Decision = DecisionApprove
	}
	return k.DecideWith(ctx, sessionID, runID, toolCallID, v)
}

// Verdict is a person's answer to an approval.
type Verdict struct {
	// Decision is DecisionApprove, DecisionDeny or DecisionAlways: approve
	// this call and, without asking again, the tool's later calls in the
	// session (only those with the same arguments when SameArguments).
	Decision      string
	SameArguments bool
	Reason        string
}

// DecideWith decides as Decide does, with any verdict. An "always" is
// recorded on the session as a standing approval once the decision is.
func (k *Kernel) DecideWith(ctx context.Context, sessionID, runID, toolCallID string, v Verdict) (Approval, error) {
	if v.Decision != DecisionApprove && v.Decision != DecisionDeny && v.Decision != DecisionAlways {
		return Approval{}, errdefs.Invalid("decision", `must be "approve", "deny" or "always"`)
	}
	if v.SameArguments && v.Decision != DecisionAlways {
		return Approval{}, errdefs.Invalid("same_arguments", `only goes with the decision "always"`)
	}
	approve, always := v.Decision != DecisionDeny, v.Decision == DecisionAlways
	reason := v.Reason
	got, err := k.GetRun(ctx, sessionID, runID)
	if err != nil {
		return Approval{}, err
	}
	sessionID = got.SessionID // the key it is stored under
	// Only a logged request can be decided.
	a, err := k.approval(ctx, sessionID, runID, toolCallID)
	if err != nil {
		return Approval{}, err
	}
	now := k.now()
	run := session.Run{SessionID: sessionID, ID: runID}
	err = k.updateRun(ctx, &run, func(r *session.Run) error {
		if _, decided := r.Decided(toolCallID); decided || a.State != ApprovalPending {
			return decidedError(toolCallID, a)
		}
		if r.State.Terminal() || r.State == session.RunQueued {
			return errdefs.New(errdefs.ErrConflict, errdefs.CodeRunNotWaiting, "run %s is not waiting for a decision", runID)
		}
		r.Decisions = append(r.Decisions, session.Decision{ToolCallID: toolCallID, Approve: approve, Reason: reason, At: now,
			Always: always, SameArguments: v.SameArguments})
		return nil
	})
	if err != nil {
		return Approval{}, err
	}
	if always {
		call := session.ToolCall{ID: toolCallID, Name: a.ToolName, Arguments: string(a.Arguments)}
		if err := k.addGrant(ctx, sessionID, grantOf(call, v.SameArguments, got.Agent)); err != nil {
			return Approval{}, fmt.Errorf("record the standing approval: %w", err)
		}
	}
	if err := k.ensure(ctx, sessionID); err != nil {
		return Approval{}, err
	}
	a.State, a.Reason, a.DecidedAt = ApprovalDenied, reason, now
	if approve {
		a.State = ApprovalApproved
	}
	return a, nil
}

// decidedError says that a, a logged request for toolCallID, was decided
// already (or a decision is on its way to the run, not yet logged).
func decidedError(toolCallID string, a Approval) error {
	state := a.State
	if state == ApprovalPending {
		state = "decided"
	}
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeApprovalDecided, "tool call %s was already %s", toolCallID, state)
}

// approval returns one approval of a run, from its events.
func (k *Kernel) approval(ctx context.Context, sessionID, runID, toolCallID string) (Approval, error) {
	all, err := k.Approvals(ctx, sessionID, runID)
	if err != nil {
		return Approval{}, err
	}
	for _, a := range all {
		if a.ToolCallID == toolCallID {
			return a, nil
		}
	}
	return Approval{}, errdefs.New(errdefs.ErrNotFound, errdefs.CodeApprovalNotFound,
		"run %s asked for no approval of tool call %q", runID, toolCallID)
}

// Approvals returns the approvals a run asked for, in order, as its
// events record them.
func (k *Kernel) Approvals(ctx context.Context, sessionID, runID string) ([]Approval, error) {
	run, err := k.GetRun(ctx, sessionID, runID)
	if err != nil {
		return nil, err
	}
	if run.StartSeq == 0 {
		return nil, nil
	}
	evs, err := k.runEvents(ctx, run)
	if err != nil {
		return nil, err
	}
	return approvalsOf(evs, run.ID, run.State.Terminal()), nil
}

// approvalsOf folds a run's approval events; when the run has ended, an
// approval never decided is reported cancelled.
func approvalsOf(evs []session.Event, runID string, ended bool) []Approval {
	var out []Approval
	index := map[string]int{}
	for i := range evs {
		ev := &evs[i]
		if ev.RunID != runID || ev.Type != session.EventCustom {
			continue
		}
		switch ev.Member("name") {
		case approvalRequested:
			v := customValue(ev)
			a := Approval{ToolCallID: str(v, "toolCallId"), ToolName: str(v, "toolName"), State: ApprovalPending,
				RequestedAt: ev.Time, ExpiresAt: parseTime(str(v, "expiresAt")), RequestSeq: ev.Seq}
			a.Arguments, _ = json.Marshal(v["arguments"])
			index[a.ToolCallID] = len(out)
			out = append(out, a)
		case approvalResolved:
			v := customValue(ev)
			if i, ok := index[str(v, "toolCallId")]; ok {
				out[i].State, out[i].Reason, out[i].DecidedAt = resolvedState(str(v, "decision")), str(v, "reason"), ev.Time
			}
		}
	}
	for i := range out {
		if ended && out[i].State == ApprovalPending {
			out[i].State = ApprovalCancelled
		}
	}
	return out
}

// The CUSTOM events of approvals.
const (
	approvalRequested = "kerneld.approval.requested"
	approvalResolved  = "kerneld.approval.resolved"
)

func requestedEvent(c session.ToolCall, expires time.Time) session.Event {
	return session.Custom(approvalRequested, map[string]any{
		"toolCallId": c.ID, "toolName": c.Name, "arguments": argumentsValue(c.Arguments),
		"expiresAt": expires.UTC().Format(time.RFC3339Nano),
	})
}

// argumentsValue is a call's arguments as an event shows them: the JSON
// value, or the text as the model sent it when it is not JSON.
func argumentsValue(arguments string) any {
	var args any = map[string]any{}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		args = arguments
	}
	return args
}

func resolvedEvent(toolCallID, decision, reason string) session.Event {
	return session.Custom(approvalResolved, map[string]any{"toolCallId": toolCallID, "decision": decision, "reason": reason})
}

// resolvedState maps a resolved event's decision to an approval state.
func resolvedState(d string) string {
	switch d {
	case DecisionApprove:
		return ApprovalApproved
	case DecisionDeny:
		return ApprovalDenied
	}
	return ApprovalCancelled
}

func customValue(ev *session.Event) map[string]any {
	v, _ := ev.Fields()["value"].(map[string]any)
	return v
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// deniedContent is what the model sees for a denied call.
func deniedContent(reason string) string {
	if reason == "" {
		return "denied"
	}
	return fmt.Sprintf("denied: %s", reason)
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
