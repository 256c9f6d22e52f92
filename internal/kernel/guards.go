package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/session"
)

// Guards asks an agent's guard (internal/guard) whether its tool calls
// may run and its runs may start. The kernel applies the decisions and
// logs every one in the run's log.
type Guards interface {
	CheckToolCall(ctx context.Context, g agents.GuardSpec, sess guard.Session, runID string, call guard.ToolCall) guard.Decision
	CheckRun(ctx context.Context, g agents.GuardSpec, sess guard.Session, runID, input string) guard.Decision
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
// logs each decision. Without a guard, every call is as the model made it.
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
		gc.denied = "denied by the guard"
		if d.Reason != "" {
			gc.denied += ": " + d.Reason
		}
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

// guardRun asks the agent's guard, when it wants to be asked before each
// run, whether the run may start with its input, and logs the decision:
// a refusal ends the run (RUN_ERROR guard_denied), an annotation is added
// to the context the model sees.
func (r *runner) guardRun(ctx context.Context) error {
	g := r.spec.Guard
	if g == nil || !g.BeforeRun || r.k.guards == nil || r.run.Kind != "" {
		return nil
	}
	sess, err := r.guardSession(ctx)
	if err != nil {
		return err
	}
	d := r.k.guards.CheckRun(ctx, *g, sess, r.run.ID, r.run.Input)
	r.traceGuard(ctx, guard.TypeBeforeRun, string(d.Action), d.Failed, d.Duration)
	value := decisionValue(d)
	value["stage"] = guard.TypeBeforeRun
	r.log.Info("guard decided", "stage", guard.TypeBeforeRun, "decision", d.Action, "failed", d.Failed, "duration", d.Duration)
	if err := r.emit(session.Custom(GuardDecided, value)); err != nil {
		return err
	}
	switch d.Action {
	case guard.Deny:
		return &guardDeniedError{reason: d.Reason}
	case guard.Annotate:
		r.run.Context = append(r.run.Context, session.ContextEntry{Description: "Note from the operator's guard", Value: d.Annotation})
		if err := r.k.saveRun(r.storeCtx(), r.run); err != nil {
			return &emitError{err: err}
		}
	}
	return nil
}
