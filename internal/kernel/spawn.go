package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools"
)

// SpawnAgentTool is the built-in tool with which an agent delegates to
// another: it runs a child session to its end and returns its answer. An
// agent may call it only if it lists it in tools and names the agents it
// may start in child_agents.
const SpawnAgentTool = "spawn_agent"

// Memory inheritance of a child session.
const (
	InheritNone = "none" // the child starts with an empty memory
	InheritCopy = "copy" // the child starts with a copy of its parent's
)

var spawnSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["agent","input"],` +
	`"properties":{"agent":{"type":"string","description":"the agent to start"},` +
	`"input":{"type":"string","description":"what to ask it"},` +
	`"name":{"type":"string","description":"a name for the child session"},` +
	`"inherit":{"type":"object","additionalProperties":false,"properties":` +
	`{"memory":{"type":"string","enum":["none","copy"],"description":"copy: the child starts with this session's memory"}}}}}`)

// spawnDefinition describes spawn_agent to an agent, naming the agents it
// may start.
func spawnDefinition(spec agents.Spec) tools.Definition {
	return tools.Definition{
		Name: SpawnAgentTool,
		Description: "Starts another agent in a child session, waits for it to finish and returns its final answer. " +
			"Agents you may start: " + strings.Join(spec.ChildAgents, ", ") + ".",
		Parameters: spawnSchema,
	}
}

type spawnArgs struct {
	Agent   string `json:"agent"`
	Input   string `json:"input"`
	Name    string `json:"name"`
	Inherit struct {
		Memory string `json:"memory"`
	} `json:"inherit"`
}

// spawn runs one spawn_agent call of the run: it creates a child session,
// runs it to its end and returns its last assistant message. The parent's
// stream shows the child as SUBAGENT_STARTED, then SUBAGENT_FINISHED or
// SUBAGENT_ERROR; the child's own events stay in the child's stream. When
// the parent run is cancelled or interrupted, so is the child's run.
func (r *runner) spawn(ctx context.Context, c session.ToolCall) (string, error) {
	args, child, err := r.checkSpawn(c.Arguments)
	if err != nil {
		return "", err
	}
	s, run, err := r.startChild(args, child)
	if err != nil {
		return "", err
	}
	if err := r.emit(session.SubagentStarted(run.ID, child.Name, c.ID, s.ID)); err != nil {
		return "", err
	}
	answer, err := r.k.awaitChild(ctx, s.ID, run.ID)
	if err != nil {
		code := "failed"
		if ctx.Err() != nil {
			code = "cancelled"
		}
		_ = r.emit(session.SubagentError(run.ID, code, err.Error())) // the run is ending anyway if this fails
		return "", fmt.Errorf("agent %q: %w", child.Name, err)
	}
	return answer, r.emit(session.SubagentFinished(run.ID, answer))
}

// checkSpawn decodes the call's arguments and checks, failing closed,
// that the run's agent may start the named one: it must be listed in
// child_agents, available, and able to do nothing its parent cannot.
func (r *runner) checkSpawn(raw string) (spawnArgs, agents.Spec, error) {
	var args spawnArgs
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return args, agents.Spec{}, fmt.Errorf("arguments: %w", err)
	}
	switch {
	case args.Agent == "" || args.Input == "":
		return args, agents.Spec{}, errors.New("arguments: agent and input are required")
	case args.Inherit.Memory != "" && args.Inherit.Memory != InheritNone && args.Inherit.Memory != InheritCopy:
		return args, agents.Spec{}, errors.New(`arguments: inherit.memory must be "none" or "copy"`)
	case !r.spec.MaySpawn(args.Agent):
		return args, agents.Spec{}, fmt.Errorf("agent %q is not one this agent may start (it may start: %s)",
			args.Agent, strings.Join(r.spec.ChildAgents, ", "))
	}
	child, err := r.k.runnableAgent(args.Agent)
	if err != nil {
		return args, child, err
	}
	return args, child, toolsWithin(child, r.spec)
}

// toolsWithin reports an error unless child can call no tool parent
// cannot: a child must never widen what its parent may do.
func toolsWithin(child, parent agents.Spec) error {
	for _, ref := range child.Tools {
		if _, ok := parent.Tool(ref.Name); !ok {
			return fmt.Errorf("agent %q may use tool %q, which this agent may not", child.Name, ref.Name)
		}
	}
	for _, srv := range child.MCPServers {
		if _, ok := parent.MCPServerOf(agents.MCPToolName(srv.Name, "")); !ok {
			return fmt.Errorf("agent %q uses MCP server %q, which this agent does not", child.Name, srv.Name)
		}
	}
	return nil
}

// startChild creates the child session under the run's session, within
// the parent agent's depth and children limits, and starts its run.
func (r *runner) startChild(args spawnArgs, child agents.Spec) (session.Session, session.Run, error) {
	parent, err := r.k.store.GetSession(r.storeCtx(), r.run.SessionID)
	if err != nil {
		return session.Session{}, session.Run{}, fmt.Errorf("get session: %w", err)
	}
	ctx := WithTenant(r.storeCtx(), parent.Tenant)
	req := CreateSession{Agent: child.Name, Name: args.Name, ParentID: parent.ID, InheritMemory: args.Inherit.Memory}
	s, err := r.k.CreateSession(ctx, req)
	if err != nil {
		return s, session.Run{}, err
	}
	run, _, err := r.k.Run(ctx, s.ID, RunRequest{Input: args.Input})
	return s, run, err
}

// awaitChild waits for a child's run to end and returns its answer. If ctx
// ends first, the child's run is cancelled, and its end awaited, first.
// The child session is closed once its run is over: it has given its
// answer, and an open child would count against max_children.
func (k *Kernel) awaitChild(ctx context.Context, sessionID, runID string) (string, error) {
	defer func() {
		if _, err := k.closeSession(context.WithoutCancel(ctx), sessionID); err != nil {
			k.log.Error("close child session", "session", sessionID, "err", err)
		}
	}()
	if err := k.waitRunEnd(ctx, sessionID, runID); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.limits.ToolTimeout)
		defer cancel()
		_ = k.stopActive(stopCtx, sessionID, runID, errCancelled) // logged by the child's run
		return "", errors.New("cancelled with its parent run")
	}
	run, err := k.store.GetRun(ctx, sessionID, runID)
	if err != nil {
		return "", fmt.Errorf("get run: %w", err)
	}
	if run.State != session.RunSucceeded {
		if run.Error != nil {
			return "", fmt.Errorf("its run %s: %s", run.State, run.Error.Message)
		}
		return "", fmt.Errorf("its run %s", run.State)
	}
	last, err := k.store.RecentMessages(ctx, sessionID, 1)
	if err != nil || len(last) == 0 {
		return "", fmt.Errorf("read its answer: %w", err)
	}
	return last[0].Content, nil
}

// waitRunEnd waits until run runID of session sessionID is no longer the
// session's active run, or ctx ends.
func (k *Kernel) waitRunEnd(ctx context.Context, sessionID, runID string) error {
	k.mu.Lock()
	ar := k.active[sessionID]
	k.mu.Unlock()
	if ar == nil || ar.runID != runID {
		return ctx.Err()
	}
	select {
	case <-ar.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
