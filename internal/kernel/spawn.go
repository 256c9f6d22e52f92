package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
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
	`"wait":{"type":"boolean","description":"false: start the child in the background and return at once with its id; its answer arrives later as a new input starting [child_result]"},` +
	`"inherit":{"type":"object","additionalProperties":false,"properties":` +
	`{"memory":{"type":"string","enum":["none","copy"],"description":"copy: the child starts with this session's memory"}}}}}`)

// spawnDefinition describes spawn_agent to an agent, naming the agents it
// may start.
func spawnDefinition(spec agents.Spec) tools.Definition {
	return tools.Definition{
		Name: SpawnAgentTool,
		Description: "Starts another agent in a child session, waits for it to finish and returns its final answer " +
			"(with wait: false, returns at once; the answer arrives later as a new input). " +
			"Agents you may start: " + strings.Join(spec.ChildAgents, ", ") + ".",
		Parameters: spawnSchema,
		// A call made again finds the child it started (see startChild).
		RetrySafe: true,
	}
}

type spawnArgs struct {
	Agent   string `json:"agent"`
	Input   string `json:"input"`
	Name    string `json:"name"`
	Wait    *bool  `json:"wait"`
	Inherit struct {
		Memory string `json:"memory"`
	} `json:"inherit"`
}

// background reports whether the call asked not to wait for the child.
func (a spawnArgs) background() bool { return a.Wait != nil && !*a.Wait }

// spawn runs one spawn_agent call of the run: it creates a child session,
// runs it to its end and returns its last assistant message. The parent's
// stream shows the child as SUBAGENT_STARTED, then SUBAGENT_FINISHED or
// SUBAGENT_ERROR; the child's own events stay in the child's stream. When
// the parent run is cancelled or interrupted, so is the child's run. A
// background child (wait: false) is only started: see childresult.go.
func (r *runner) spawn(ctx context.Context, c session.ToolCall) (string, error) {
	args, child, err := r.checkSpawn(c.Arguments)
	if err != nil {
		return "", err
	}
	s, run, err := r.startChild(args, child, c.ID)
	if err != nil {
		return "", err
	}
	if args.background() {
		return r.startedInBackground(c, child.Name, s, run)
	}
	// This runs on a tool call's goroutine: the run's own logs the events.
	if !r.ar.notices.post(session.SubagentStarted(run.ID, child.Name, c.ID, s.ID)) {
		return "", errSealed
	}
	return r.followChild(ctx, child.Name, s.ID, run.ID)
}

// followChild waits for the run runID of the child session sessionID,
// which runs agent name, to end and returns its answer, saying in the
// parent's stream how it ended. A continued run follows, this way, the
// child a cut spawn_agent call had started.
func (r *runner) followChild(ctx context.Context, name, sessionID, runID string) (string, error) {
	answer, err := r.k.awaitChild(ctx, sessionID, runID)
	if err != nil {
		code := "failed"
		if ctx.Err() != nil {
			code = "cancelled"
		}
		r.ar.notices.post(session.SubagentError(runID, code, err.Error())) // refused once the run has ended anyway
		return "", fmt.Errorf("agent %q: %w", name, err)
	}
	if !r.ar.notices.post(session.SubagentFinished(runID, answer)) {
		return "", errSealed
	}
	return answer, nil
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

// toolsWithin reports an error unless child can do nothing parent cannot:
// a child must never widen what its parent may do. Every tool the child
// lists must be one the parent may call; every MCP server of the child
// must be the parent's, reached the same way, with no tool the parent's
// allow list leaves out; and every tool the parent may call only with
// approval needs it in the child too, however the child reaches it, so
// that delegating cannot launder an approval away.
func toolsWithin(child, parent agents.Spec) error {
	for _, ref := range child.Tools {
		if _, ok := parent.Tool(ref.Name); !ok {
			return fmt.Errorf("agent %q may use tool %q, which this agent may not", child.Name, ref.Name)
		}
	}
	for _, srv := range child.MCPServers {
		if err := mcpServerWithin(child.Name, srv, parent); err != nil {
			return err
		}
	}
	for _, ref := range parent.Tools {
		if !ref.RequireApproval {
			continue
		}
		if c, ok := child.Tool(ref.Name); ok && !c.RequireApproval {
			return fmt.Errorf("agent %q may use tool %q without approval, which this agent may use only with it",
				child.Name, ref.Name)
		}
	}
	return nil
}

// mcpServerWithin reports an error unless srv, an MCP server of agent
// child, is one of parent's servers: the same name, the same connection
// (command, args and env, or url and headers) and an allow list within
// the parent's. An empty allow list admits every tool.
func mcpServerWithin(child string, srv agents.MCPServer, parent agents.Spec) error {
	i := slices.IndexFunc(parent.MCPServers, func(p agents.MCPServer) bool { return p.Name == srv.Name })
	if i < 0 {
		return fmt.Errorf("agent %q uses MCP server %q, which this agent does not", child, srv.Name)
	}
	p := parent.MCPServers[i]
	if srv.Command != p.Command || !slices.Equal(srv.Args, p.Args) || !maps.Equal(srv.Env, p.Env) ||
		srv.URL != p.URL || !maps.Equal(srv.Headers, p.Headers) {
		return fmt.Errorf("agent %q connects to MCP server %q differently than this agent does", child, srv.Name)
	}
	if len(p.Allow) == 0 {
		return nil
	}
	if len(srv.Allow) == 0 {
		return fmt.Errorf("agent %q may use every tool of MCP server %q; this agent may use only %s",
			child, srv.Name, strings.Join(p.Allow, ", "))
	}
	for _, tool := range srv.Allow {
		if !p.Allows(tool) {
			return fmt.Errorf("agent %q may use tool %q of MCP server %q, which this agent may not", child, tool, srv.Name)
		}
	}
	return nil
}

// checkDepth returns an error unless a new child of parent, spawned by
// agent spawner, stays within spawner's max_depth and that of every
// ancestor's agent up to the root: the smallest of them bounds the whole
// subtree, so a child agent with a larger limit cannot nest deeper than a
// session above it allows. On parent itself the spawner's limit stands
// for the session agent's, as every limit of a run is its agent's.
// Depths count from the root, as max_depth does.
func (k *Kernel) checkDepth(ctx context.Context, parent session.Session, spawner agents.Spec) error {
	limit, agent := -1, ""
	for s := parent; ; {
		spec, err := spawner, error(nil)
		if s.ID != parent.ID {
			spec, err = k.agents.Get(s.Agent)
		}
		if err != nil {
			return fmt.Errorf("agent of session %s: %w", s.ID, err)
		}
		if limit < 0 || spec.Limits.MaxDepth < limit {
			limit, agent = spec.Limits.MaxDepth, spec.Name
		}
		if s.ParentID == "" {
			break
		}
		up, err := k.store.GetSession(ctx, s.ParentID)
		if err != nil {
			return fmt.Errorf("get parent of session %s: %w", s.ID, err)
		}
		if up.Depth != s.Depth-1 { // depths fall to 0 at the root, so the walk ends
			return fmt.Errorf("session %s at depth %d has parent %s at depth %d", s.ID, s.Depth, up.ID, up.Depth)
		}
		s = up
	}
	if parent.Depth+1 > limit {
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeMaxDepthExceeded,
			"agent %q allows sessions %d deep; the parent is at depth %d", agent, limit, parent.Depth)
	}
	return nil
}

// startChild creates the child session under the run's session, within
// the limits CreateSession checks (the run's agent's max_children and
// max_depth, and every ancestor's max_depth), and starts its run. The call callID keys both:
// made again (by a continued run), it finds the child and the run it
// started rather than start others.
func (r *runner) startChild(args spawnArgs, child agents.Spec, callID string) (session.Session, session.Run, error) {
	parent, err := r.k.store.GetSession(r.storeCtx(), r.run.SessionID)
	if err != nil {
		return session.Session{}, session.Run{}, fmt.Errorf("get session: %w", err)
	}
	ctx := WithTenant(r.storeCtx(), parent.Tenant)
	key := spawnKey(r.run.ID, callID)
	s, found, err := r.k.spawnedChild(ctx, parent.ID, key)
	if err == nil && !found {
		req := CreateSession{Agent: child.Name, Name: args.Name, ParentID: parent.ID, InheritMemory: args.Inherit.Memory,
			spawnKey: key, spawner: r.spec.Name}
		s, err = r.k.CreateSession(ctx, req)
	}
	if err != nil {
		return s, session.Run{}, err
	}
	run, _, err := r.k.Run(ctx, s.ID, RunRequest{Input: args.Input, IdempotencyKey: key, background: args.background()})
	return s, run, err
}

// spawnKey names spawn_agent call callID of run runID.
func spawnKey(runID, callID string) string { return "spawn:" + runID + ":" + callID }

// spawnedChild returns the child of session parentID that the spawn_agent
// call key started, if there is one.
func (k *Kernel) spawnedChild(ctx context.Context, parentID, key string) (session.Session, bool, error) {
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: parentID})
	if err != nil {
		return session.Session{}, false, fmt.Errorf("list children: %w", err)
	}
	for _, c := range children {
		if c.SpawnKey == key {
			return c, true, nil
		}
	}
	return session.Session{}, false, nil
}

// awaitChild waits for a child's run to end and returns its answer. If ctx
// ends first, the child's run is cancelled, and its end awaited, first.
// The child session is closed once its run is over: it has given its
// answer, and an open child would count against max_children.
func (k *Kernel) awaitChild(ctx context.Context, sessionID, runID string) (string, error) {
	defer func() {
		if _, err := k.closeSession(context.WithoutCancel(ctx), sessionID, ""); err != nil {
			k.log.Error("close child session", "session", sessionID, "err", err)
		}
	}()
	run, err := k.waitRun(ctx, sessionID, runID, ended)
	if err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.limits.ToolTimeout)
		defer cancel()
		_, _ = k.cancelRun(stopCtx, run) // logged by the child's run
		return "", errors.New("cancelled with its parent run")
	}
	return k.answerOf(ctx, run)
}

// answerOf returns the answer of a child's run, ended: its last message,
// or an error saying how it ended otherwise.
func (k *Kernel) answerOf(ctx context.Context, run session.Run) (string, error) {
	if run.State != session.RunSucceeded {
		if run.Error != nil {
			return "", fmt.Errorf("its run %s: %s", run.State, run.Error.Message)
		}
		return "", fmt.Errorf("its run %s", run.State)
	}
	last, err := k.store.RecentMessages(ctx, run.SessionID, 1)
	if err != nil || len(last) == 0 {
		return "", fmt.Errorf("read its answer: %w", err)
	}
	return last[0].Content, nil
}

// rejoinChild follows the child run a cut spawn_agent call c had started,
// rather than start another: the child was continued on its own, and its
// answer is the call's.
func (r *runner) rejoinChild(ctx context.Context, c session.ToolCall, child *replayedChild) toolResult {
	answer, err := r.followChild(ctx, child.name, child.sessionID, child.runID)
	if err != nil {
		return toolResult{call: c, content: "error: " + err.Error(), isError: true}
	}
	return toolResult{call: c, content: answer}
}

// childResult is the result of spawn_agent call c whose child's end the
// log already says.
func childResult(c session.ToolCall, child *replayedChild) toolResult {
	if child.failure != "" {
		return toolResult{call: c, content: fmt.Sprintf("error: agent %q: %s", child.name, child.failure), isError: true}
	}
	return toolResult{call: c, content: child.answer}
}
