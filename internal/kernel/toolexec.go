package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools"
)

// toolResult is what one tool call produced.
type toolResult struct {
	call    session.ToolCall
	content string
	isError bool
}

// recordResult emits a tool's result and adds it to the history.
func (r *runner) recordResult(res toolResult) error {
	id := session.NewMessageID()
	if err := r.emit(session.ToolCallResult(id, res.call.ID, res.content, res.isError)); err != nil {
		return err
	}
	r.answered(res.call.ID)
	return r.record(session.Message{ID: id, Role: session.RoleTool, Content: res.content, ToolCallID: res.call.ID, IsError: res.isError})
}

// callTool runs one tool call. Every failure, a panic included, becomes an
// error result for the model rather than a failed run.
func (r *runner) callTool(ctx context.Context, c session.ToolCall) (res toolResult) {
	res.call = c
	ctx, span := r.startToolSpan(ctx, c)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("tool panicked", "tool", c.Name, "err", fmt.Errorf("%v", p))
			res.content, res.isError = "error: the tool failed", true
		}
		r.endToolSpan(span, res)
	}()
	t, err := r.resolveTool(c)
	if err == nil {
		res.content, err = r.invoke(ctx, t, c)
	}
	if err != nil {
		res.content, res.isError = "error: "+err.Error(), true
	}
	return res
}

// resolveTool finds the tool a call names, if this agent may call it.
func (r *runner) resolveTool(c session.ToolCall) (tools.Tool, error) {
	if _, ok := r.spec.Tool(c.Name); !ok {
		return nil, fmt.Errorf("tool %q is not available to this agent", c.Name)
	}
	t, ok := r.k.tool(r, c.Name)
	if !ok {
		return nil, r.missingTool(c.Name)
	}
	if !isJSONObject(c.Arguments) {
		return nil, errors.New("arguments must be a JSON object")
	}
	return t, nil
}

// missingTool explains why a tool the agent may call cannot be called.
func (r *runner) missingTool(name string) error {
	srv, ok := r.spec.MCPServerOf(name)
	if !ok {
		return fmt.Errorf("tool %q is not installed", name)
	}
	if err := r.mcpDown[srv.Name]; err != nil {
		return fmt.Errorf("MCP server %q is unavailable: %w", srv.Name, err)
	}
	return fmt.Errorf("MCP server %q has no tool %q", srv.Name, strings.TrimPrefix(name, srv.Name+agents.MCPSeparator))
}

// invoke calls t with the per-call timeout. A spawned agent is bounded by
// its own run timeout instead, and the parent's.
func (r *runner) invoke(ctx context.Context, t tools.Tool, c session.ToolCall) (string, error) {
	timeout := r.k.limits.ToolTimeout
	if c.Name == SpawnAgentTool {
		timeout = runTimeout(r.spec.Limits.RunTimeout)
	}
	if srv, ok := r.spec.MCPServerOf(c.Name); ok {
		// The server's own call_timeout ends the call, with a message that
		// says so; this bound only backs it up.
		timeout = srv.CallTimeout + time.Second
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := t.Call(tctx, tools.Call{
		SessionID: r.run.SessionID, RunID: r.run.ID, ToolCallID: c.ID,
		Arguments: json.RawMessage(c.Arguments), Memory: sessionMemory{k: r.k, sessionID: r.run.SessionID},
	})
	if err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("tool %q timed out after %s", c.Name, r.k.limits.ToolTimeout)
	}
	return out, err
}

func isJSONObject(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
}

// tool returns the named tool as run r may call it: spawn_agent bound to
// r, a tool of one of its agent's MCP servers, or a registered tool.
func (k *Kernel) tool(r *runner, name string) (tools.Tool, bool) {
	if name == SpawnAgentTool {
		return spawnTool{r: r}, true
	}
	if t, ok := r.mcpTools[name]; ok {
		return t, true
	}
	return k.tools.Get(name)
}

// spawnTool is spawn_agent as a tools.Tool bound to the calling run.
type spawnTool struct{ r *runner }

func (t spawnTool) Definition() tools.Definition { return spawnDefinition(t.r.spec) }

func (t spawnTool) Call(ctx context.Context, c tools.Call) (string, error) {
	return t.r.spawn(ctx, session.ToolCall{ID: c.ToolCallID, Name: SpawnAgentTool, Arguments: string(c.Arguments)})
}

// retrySafe reports whether call c may be made again after a process
// stopped in the middle of it: the agent file's retry for the tool when it
// sets one, else the tool's own word (see tools.Definition.RetrySafe). A
// tool the run cannot reach now is not.
func (r *runner) retrySafe(c session.ToolCall) bool {
	if ref, ok := r.spec.Tool(c.Name); ok && ref.Retry != "" {
		return ref.Retry == agents.RetrySafe
	}
	t, err := r.resolveTool(c)
	return err == nil && t.Definition().RetrySafe
}
