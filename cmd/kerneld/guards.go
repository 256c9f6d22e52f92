package main

import (
	"context"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/webhook"
)

// guards asks the agents' guards, over outbound requests under the
// webhook address policy: the kernel's Guards.
type guards struct {
	caller *guard.Caller
	policy webhook.Policy
}

func newGuards(policy webhook.Policy) guards {
	return guards{caller: guard.NewCaller(policy, "kerneld/"+version), policy: policy}
}

// CheckToolCall implements kernel.Guards.
func (g guards) CheckToolCall(ctx context.Context, spec agents.GuardSpec, sess guard.Session, runID string, call guard.ToolCall) guard.Decision {
	gd, err := guard.New(guardConfig(spec), g.policy)
	if err != nil {
		return misconfigured(err)
	}
	return g.caller.CheckToolCall(ctx, gd, sess, runID, call)
}

// CheckRun implements kernel.Guards.
func (g guards) CheckRun(ctx context.Context, spec agents.GuardSpec, sess guard.Session, runID, input string, resume *guard.Resume) guard.Decision {
	gd, err := guard.New(guardConfig(spec), g.policy)
	if err != nil {
		return misconfigured(err)
	}
	return g.caller.CheckRun(ctx, gd, sess, runID, input, resume)
}

// misconfigured is the decision of a guard that cannot be called: the
// agents were checked at load, so only a reload can get here; it fails
// closed whatever on_failure says, since the file cannot be trusted.
func misconfigured(err error) guard.Decision {
	return guard.Decision{Action: guard.Deny, Failed: true, Error: err.Error(), Reason: "the agent's guard is misconfigured"}
}
