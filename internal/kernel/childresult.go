package kernel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Background children. spawn_agent with wait: false starts a child and
// returns at once with its ids; the parent's run goes on. When the
// child's run ends, its session's driver (on whichever replica holds the
// child) posts the answer to the parent session as a new input with
// source child_result: queued behind a busy parent's active run, or
// steered into it when the parent's agent says child_results: steer; run
// at once on an idle parent. The run that takes the input in logs
// CUSTOM kerneld.child.result first. The post carries an idempotency key
// named after the child's run, so it is made once however often it is
// tried. The child is closed once its answer is posted: it no longer
// counts against max_children, and closing the parent closes (and so
// cancels) the children still at work.

// Events that mark a background child in its parent's stream.
const (
	customChildStarted = "kerneld.child.started"
	customChildResult  = "kerneld.child.result"
)

// childResultPrefix starts the input that brings a child's answer, so
// the model (and a script) can tell it from a person's.
const childResultPrefix = "[child_result]"

// startedInBackground answers spawn_agent call c that started child
// session s, running agent, in the background: the parent's stream marks
// the child, and the model learns its ids.
func (r *runner) startedInBackground(c session.ToolCall, agent string, s session.Session, run session.Run) (string, error) {
	ev := session.Custom(customChildStarted, map[string]string{"runId": r.run.ID, "toolCallId": c.ID,
		"childSessionId": session.PublicID(s.ID), "childRunId": run.ID, "agent": agent})
	if !r.ar.notices.post(ev) { // this runs on a tool call's goroutine: the run's own logs it
		return "", errSealed
	}
	out, err := json.Marshal(map[string]string{"child_session_id": session.PublicID(s.ID), "child_run_id": run.ID,
		"agent": agent, "state": "running",
		"note": "the child works in the background; its answer arrives as a new input starting " + childResultPrefix})
	return string(out), err
}

// childResultEvent marks, in run runID of the parent, the input that
// brings child's answer.
func childResultEvent(runID string, c session.ChildResult) session.Event {
	return session.Custom(customChildResult, map[string]string{"runId": runID,
		"childSessionId": session.PublicID(c.SessionID), "childRunId": c.RunID, "agent": c.Agent, "state": string(c.State)})
}

// childEnded is called by a session's driver once run, of that session,
// has ended: a background child's answer is posted to its parent, and
// then the child is closed, on a goroutine of the kernel's, since the
// closing waits for the driver to settle the session. The post comes
// first, before the driver settles the child, so that a process dying
// between the run's end and the post leaves the child's record busy,
// naming the ended run: whoever frees it next (freeSession, at startup or
// on a take-over) finds the answer undelivered and posts it, once, the
// post's idempotency key making a second post the first.
func (k *Kernel) childEnded(ctx context.Context, run session.Run) {
	if !run.Background || !run.State.Terminal() {
		return
	}
	if err := k.postChildResult(ctx, run); err != nil {
		k.log.Warn("post a background child's answer to its parent", "session", run.SessionID, "run", run.ID, "err", err)
	}
	k.wg.Go(func() {
		if _, err := k.closeSession(ctx, run.SessionID, "its answer was posted to its parent"); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			k.log.Error("close child session", "session", run.SessionID, "err", err)
		}
	})
}

// deliverLeft posts the answer of background child s, whose record a
// process that died left busy with its ended run (see childEnded), and
// closes s. Any other session it leaves alone.
func (k *Kernel) deliverLeft(ctx context.Context, s session.Session) {
	if s.ParentID == "" || s.ActiveRunID == "" || s.State == session.StateClosed {
		return
	}
	run, err := k.store.GetRun(ctx, s.ID, s.ActiveRunID)
	if err != nil || !run.Background || !run.State.Terminal() {
		return
	}
	k.log.Info("posting the answer of a background child its process left undelivered", "session", s.ID, "run", run.ID)
	k.childEnded(ctx, run)
}

// postChildResult posts the answer of run, a background child's, ended,
// to the child's parent session as a child_result input. A parent closed
// or gone meanwhile hears nothing.
func (k *Kernel) postChildResult(ctx context.Context, run session.Run) error {
	child, err := k.store.GetSession(ctx, run.SessionID)
	if err != nil || child.ParentID == "" {
		return err
	}
	parent, err := k.store.GetSession(ctx, child.ParentID)
	if err != nil {
		return err
	}
	res := session.ChildResult{SessionID: child.ID, RunID: run.ID, Agent: child.Agent, State: run.State}
	if res.Answer, err = k.answerOf(ctx, run); err != nil {
		res.Answer, res.Error = "", err.Error()
	}
	agent := k.spawner(ctx, parent, child)
	req := RunRequest{Input: k.childResultInput(res), IfBusy: k.childResultsPolicy(cmp.Or(agent, parent.Agent)),
		IdempotencyKey: "child_result:" + run.ID, childResult: &res, Agent: agent}
	ctx = WithTenant(ctx, parent.Tenant)
	_, _, err = k.Run(ctx, parent.ID, req)
	if errdefs.CodeOf(err) == errdefs.CodeAgentNotAllowed {
		// The spawner may no longer take turns on the parent (its agents
		// changed): the parent's own agent hears the answer instead.
		req.Agent, req.IfBusy = "", k.childResultsPolicy(parent.Agent)
		_, _, err = k.Run(ctx, parent.ID, req)
	}
	if errdefs.CodeOf(err) == errdefs.CodeSessionClosed {
		return nil
	}
	return err
}

// spawner returns the agent whose run spawned child on parent when it is
// not parent's own agent (another agent's turn, see peers.go): the answer
// goes back to the agent that asked for it. "" is parent's own.
func (k *Kernel) spawner(ctx context.Context, parent, child session.Session) string {
	rest, ok := strings.CutPrefix(child.SpawnKey, "spawn:")
	runID, _, found := strings.Cut(rest, ":")
	if !ok || !found {
		return ""
	}
	run, err := k.store.GetRun(ctx, parent.ID, runID)
	if err != nil {
		return ""
	}
	return run.Agent
}

// childResultsPolicy is how a child's answer reaches a busy session when
// it goes to agent: queued, or steered into the active run when the
// agent's file says child_results: steer.
func (k *Kernel) childResultsPolicy(agent string) BusyPolicy {
	if spec, err := k.agents.Get(agent); err == nil && spec.ChildResults == agents.ChildResultsSteer {
		return BusySteer
	}
	return BusyQueue
}

// childResultInput is the input that brings res to the parent's model,
// within the input size limit.
func (k *Kernel) childResultInput(res session.ChildResult) string {
	head := fmt.Sprintf("%s The agent %q you started in the background (child session %s, run %s) ",
		childResultPrefix, res.Agent, session.PublicID(res.SessionID), res.RunID)
	body := "finished. Its answer:\n" + res.Answer
	if res.Error != "" {
		body = "did not finish: " + res.Error
	}
	if limit := k.limits.MaxInputBytes; limit > 0 && len(head)+len(body) > limit {
		body = session.CutRunes(body, max(limit-len(head), 0))
	}
	return head + body
}
