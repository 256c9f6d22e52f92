package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/session"
)

// Guards asks an agent's guard (internal/guard) whether its tool calls
// may run and its runs may start. The kernel applies the decisions and
// logs every one in the run's log.
type Guards interface {
	CheckToolCall(ctx context.Context, g agents.GuardSpec, sess guard.Session, runID string, call guard.ToolCall) guard.Decision
	// CheckRun asks before a run starts, or, with resume set, before a
	// continued run goes on.
	CheckRun(ctx context.Context, g agents.GuardSpec, sess guard.Session, runID, input string, resume *guard.Resume) guard.Decision
}

// GuardDecided is the CUSTOM event that logs a guard's decision.
const GuardDecided = "kerneld.guard.decided"

// guardedCall is a tool call as its guard left it: the call (with new
// arguments if rewritten), and whether it is denied or must be approved.
type guardedCall struct {
	call   session.ToolCall
	denied string // the denial the model sees; "" when not denied
	ask    bool
}

// guardCalls asks the agent's guard about each of calls, in order, and
// logs each decision, durably. Without a guard, every call is as the
// model made it.
func (r *runner) guardCalls(ctx context.Context, calls []session.ToolCall) ([]guardedCall, error) {
	out := make([]guardedCall, len(calls))
	for i, c := range calls {
		out[i].call = c
	}
	if r.spec.Guard == nil || r.k.guards == nil {
		return out, nil
	}
	sess, err := r.guardSession(ctx)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if err := r.guardCall(ctx, sess, &out[i]); err != nil {
			return nil, err
		}
	}
	// The decisions are durable before any call they allowed runs: a
	// process that dies meanwhile leaves them in the log, where whoever
	// continues the run finds the calls denied (see answerLeftCalls).
	if _, err := r.events.flush(); err != nil {
		return nil, &emitError{err: err}
	}
	return out, nil
}

// guardCall asks the guard about gc's call, applies its decision to gc and
// logs it.
func (r *runner) guardCall(ctx context.Context, sess guard.Session, gc *guardedCall) error {
	c := gc.call
	ref, _ := r.spec.Tool(c.Name)
	d := r.k.guards.CheckToolCall(ctx, *r.spec.Guard, sess, r.run.ID, guard.ToolCall{
		ID: c.ID, Name: c.Name, Arguments: []byte(c.Arguments), RequiresApproval: ref.RequireApproval,
	})
	switch d.Action {
	case guard.Deny:
		gc.denied = guardDenial(d.Reason)
	case guard.Ask:
		gc.ask = true
	case guard.Rewrite:
		gc.call.Arguments = string(d.Arguments)
	}
	r.traceGuard(ctx, guard.TypeToolCall, string(d.Action), d.Failed, d.Duration)
	value := decisionValue(d)
	value["stage"], value["toolCallId"], value["toolName"] = guard.TypeToolCall, c.ID, c.Name
	r.log.Info("guard decided", "tool", c.Name, "tool_call", c.ID, "decision", d.Action, "failed", d.Failed,
		"duration", d.Duration)
	return r.emit(session.Custom(GuardDecided, value))
}

// guardDenial is what the model sees for a call its guard denied.
func guardDenial(reason string) string {
	if reason == "" {
		return "denied by the guard"
	}
	return "denied by the guard: " + reason
}

// guardDenials returns the tool calls of run runID that its guard denied,
// as evs (its log) records the decisions: each call's id and what the
// model is to see. A denied call never ran.
func guardDenials(evs []session.Event, runID string) map[string]string {
	out := map[string]string{}
	for i := range evs {
		ev := &evs[i]
		if ev.RunID != runID || ev.Type != session.EventCustom || ev.Member("name") != GuardDecided {
			continue
		}
		v := customValue(ev)
		if str(v, "stage") == guard.TypeToolCall && str(v, "decision") == string(guard.Deny) {
			out[str(v, "toolCallId")] = guardDenial(str(v, "reason"))
		}
	}
	return out
}

// decisionValue is the value of the CUSTOM event logging d.
func decisionValue(d guard.Decision) map[string]any {
	v := map[string]any{"decision": string(d.Action), "durationMs": d.Duration.Milliseconds()}
	if d.Reason != "" {
		v["reason"] = d.Reason
	}
	if d.Action == guard.Rewrite {
		v["arguments"] = d.Arguments
	}
	if d.Annotation != "" {
		v["annotation"] = d.Annotation
	}
	if d.Failed {
		v["failed"], v["error"] = true, d.Error
	}
	return v
}

// guardSession is what the guard is told of the run's session.
func (r *runner) guardSession(ctx context.Context) (guard.Session, error) {
	s, err := r.k.store.GetSession(ctx, r.run.SessionID)
	if err != nil {
		return guard.Session{}, fmt.Errorf("get session: %w", err)
	}
	return guard.Session{ID: session.PublicID(s.ID), Tenant: s.Tenant, Agent: s.Agent, Name: s.Name, Metadata: s.Metadata,
		ParentID: session.PublicID(s.ParentID), Depth: s.Depth}, nil
}

// errGuardDenied stops a run its guard refused before it started.
type guardDeniedError struct{ reason string }

func (e *guardDeniedError) Error() string {
	if e.reason == "" {
		return "the guard refused the run"
	}
	return "the guard refused the run: " + e.reason
}

// guardEnding is how a run its guard refused ends.
func guardEnding(err error) (code, message string, ok bool) {
	ge, ok := errors.AsType[*guardDeniedError](err)
	if !ok {
		return "", "", false
	}
	return session.ErrorCodeGuardDenied, ge.Error(), true
}

// guardNote describes a before_run guard's annotation among the run's
// context entries.
const guardNote = "Note from the operator's guard"

// guardRun asks the agent's guard, when it wants to be asked before each
// run, whether the run may start with its input, and logs the decision:
// a refusal ends the run (RUN_ERROR guard_denied), an annotation is added
// to the context the model sees. A continued run is asked about again
// before it goes on (see recheckRun), the request saying from where.
func (r *runner) guardRun(ctx context.Context) error {
	g := r.spec.Guard
	if g == nil || !g.BeforeRun || r.k.guards == nil || r.run.Kind != "" {
		return nil
	}
	sess, err := r.guardSession(ctx)
	if err != nil {
		return err
	}
	var resume *guard.Resume
	if from := r.ar.from; from != nil && r.ar.started == nil {
		resume = &guard.Resume{Step: from.step, Reason: from.reason}
	}
	d := r.k.guards.CheckRun(ctx, *g, sess, r.run.ID, r.run.Input, resume)
	r.traceGuard(ctx, guard.TypeBeforeRun, string(d.Action), d.Failed, d.Duration)
	value := decisionValue(d)
	value["stage"] = guard.TypeBeforeRun
	if resume != nil {
		value["resumed"] = true
	}
	r.log.Info("guard decided", "stage", guard.TypeBeforeRun, "decision", d.Action, "failed", d.Failed, "duration", d.Duration,
		"resumed", resume != nil)
	if err := r.emit(session.Custom(GuardDecided, value)); err != nil {
		return err
	}
	switch d.Action {
	case guard.Deny:
		return &guardDeniedError{reason: d.Reason}
	case guard.Annotate:
		note := session.ContextEntry{Description: guardNote, Value: d.Annotation}
		if slices.Contains(r.run.Context, note) {
			return nil // said when the run started, or before it was continued
		}
		r.run.Context = append(r.run.Context, note)
		if err := r.k.saveRun(r.storeCtx(), r.run); err != nil {
			return &emitError{err: err}
		}
	}
	return nil
}

// recheckRun asks the before_run guard again before a continued run goes
// on: the operator's policy may have changed since the run started, and a
// process that died while asking never logged the answer. open are the
// tool calls the run left without a result: a refusal ends the run, and
// its end answers them and resolves the approvals they awaited.
func (r *runner) recheckRun(ctx context.Context, open []session.ToolCall) error {
	err := r.guardRun(ctx)
	if _, denied := errors.AsType[*guardDeniedError](err); !denied || len(open) == 0 {
		return err
	}
	r.pending = append(r.pending, open...)
	evs, lerr := r.k.runEvents(ctx, *r.run)
	if lerr != nil {
		r.log.Error("read the approvals a refused run awaited", "err", lerr) // listed as the run's end leaves them
	}
	for _, a := range approvalsOf(evs, r.run.ID, false) {
		if a.State == ApprovalPending {
			r.undecided = append(r.undecided, a.ToolCallID)
		}
	}
	return err
}
