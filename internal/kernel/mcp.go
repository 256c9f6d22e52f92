package kernel

import (
	"context"
	"strings"
	"sync"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// mcpUnavailable is the CUSTOM event a run emits when one of its agent's
// MCP servers cannot start: the run goes on without that server's tools,
// and the stream says why they are missing.
const mcpUnavailable = "kerneld.mcp.unavailable"

// MCPServerStatus is how one of an agent's MCP servers is doing.
type MCPServerStatus struct {
	Name      string
	Transport string // "stdio" or "http"
	State     string // "stopped", "starting", "running" or "failed"
	Err       error  // why it failed, when State is "failed"
}

// mcpConfig translates an agent's MCP server into the Manager's terms.
func mcpConfig(srv agents.MCPServer) mcp.ServerConfig {
	return mcp.ServerConfig{
		Name: srv.Name, Command: srv.Command, Args: srv.Args, Env: srv.Env,
		URL: srv.URL, Headers: srv.Headers, CallTimeout: srv.CallTimeout,
	}
}

// mcpServerTools is what one server offered an agent, or why it could not.
type mcpServerTools struct {
	server agents.MCPServer
	tools  []tools.Tool // those the agent's allow list admits
	err    error
}

// mcpTools reaches every MCP server of spec, all at once so that the
// slowest start bounds the wait. Without start, a server that is not
// running is skipped.
func (k *Kernel) mcpTools(ctx context.Context, spec agents.Spec, start bool) []mcpServerTools {
	out := make([]mcpServerTools, len(spec.MCPServers))
	var wg sync.WaitGroup
	for i, srv := range spec.MCPServers {
		out[i].server = srv
		if state, _ := k.mcp.Status(mcpConfig(srv)); !start && state != mcp.StateRunning {
			continue
		}
		wg.Go(func() {
			all, err := k.mcp.Tools(ctx, mcpConfig(srv))
			out[i] = mcpServerTools{server: srv, tools: allowed(srv, all), err: err}
		})
	}
	wg.Wait()
	return out
}

// allowed keeps the tools srv's allow list admits.
func allowed(srv agents.MCPServer, all []tools.Tool) []tools.Tool {
	var out []tools.Tool
	for _, t := range all {
		if srv.Allows(strings.TrimPrefix(t.Definition().Name, srv.Name+agents.MCPSeparator)) {
			out = append(out, t)
		}
	}
	return out
}

// prepareMCP offers the run's model the tools of its agent's MCP servers.
// A server that cannot start leaves its tools out and says so in the
// stream; the run goes on, as it would if one tool call failed.
func (r *runner) prepareMCP(ctx context.Context) error {
	for _, st := range r.k.mcpTools(ctx, r.spec, true) {
		if st.err != nil {
			if err := r.mcpServerDown(st.server.Name, st.err); err != nil {
				return err
			}
			continue
		}
		r.offerMCPTools(st.tools, false)
	}
	return nil
}

// mcpServerDown records that server name cannot be reached, for the
// calls of its tools, and says so in the stream.
func (r *runner) mcpServerDown(name string, cause error) error {
	r.log.Warn("mcp server unavailable", "server", name, "err", cause)
	r.mcpDown[name] = cause
	return r.emit(session.Custom(mcpUnavailable, map[string]string{"server": name, "error": cause.Error()}))
}

// offerMCPTools offers the run's model ts; with requireApproval, each of
// their calls waits for a decision.
func (r *runner) offerMCPTools(ts []tools.Tool, requireApproval bool) {
	for _, t := range ts {
		d := t.Definition()
		r.mcpTools[d.Name] = t
		r.tools = append(r.tools, llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
		if requireApproval {
			r.spec.Tools = append(r.spec.Tools, agents.ToolRef{Name: d.Name, RequireApproval: true})
		}
	}
}

// AgentTool is one tool an agent may call, as its model sees it.
type AgentTool struct {
	tools.Definition // Parameters is nil when the tool is not offered now
	RequireApproval  bool
	Server           string // the MCP server offering it; "" for kerneld's own
}

// AgentTools lists the tools spec may call and how its MCP servers are
// doing. With start, servers not yet running are started first, so the
// list is what a run would see; without, only running servers are asked.
// A tool the agent file names but no running server offers is listed
// without parameters.
func (k *Kernel) AgentTools(ctx context.Context, spec agents.Spec, start bool) ([]AgentTool, []MCPServerStatus) {
	var out []AgentTool
	for _, ref := range spec.Tools {
		if _, ok := spec.MCPServerOf(ref.Name); ok {
			continue
		}
		t := AgentTool{Definition: tools.Definition{Name: ref.Name}, RequireApproval: ref.RequireApproval}
		if d, ok := k.builtinDefinition(spec, ref.Name); ok {
			t.Definition = d
		}
		out = append(out, t)
	}
	offered := map[string]bool{}
	for _, st := range k.mcpTools(ctx, spec, start) {
		for _, mt := range st.tools {
			d := mt.Definition()
			ref, _ := spec.Tool(d.Name)
			out = append(out, AgentTool{Definition: d, RequireApproval: ref.RequireApproval, Server: st.server.Name})
			offered[d.Name] = true
		}
	}
	for _, ref := range spec.Tools {
		if srv, ok := spec.MCPServerOf(ref.Name); ok && !offered[ref.Name] {
			out = append(out, AgentTool{Definition: tools.Definition{Name: ref.Name}, RequireApproval: ref.RequireApproval, Server: srv.Name})
		}
	}
	return out, k.MCPStatus(spec)
}

// builtinDefinition describes a tool kerneld provides itself.
func (k *Kernel) builtinDefinition(spec agents.Spec, name string) (tools.Definition, bool) {
	if name == SpawnAgentTool {
		return spawnDefinition(spec), true
	}
	t, ok := k.tools.Get(name)
	if !ok {
		return tools.Definition{}, false
	}
	return t.Definition(), true
}

// MCPStatus reports how each of spec's MCP servers is doing, without
// starting any.
func (k *Kernel) MCPStatus(spec agents.Spec) []MCPServerStatus {
	out := make([]MCPServerStatus, len(spec.MCPServers))
	for i, srv := range spec.MCPServers {
		st := MCPServerStatus{Name: srv.Name, Transport: "stdio"}
		if srv.URL != "" {
			st.Transport = "http"
		}
		st.State, st.Err = k.mcp.Status(mcpConfig(srv))
		out[i] = st
	}
	return out
}

// ReloadAgents re-reads the agent files, then stops the MCP servers no
// agent is configured with any more (removed, or configured differently)
// and returns their names; the others keep running. A run under way keeps
// the definition it started with: its calls to a stopped server become
// error results for its model. On error the agents stay as they were and
// no server stops.
func (k *Kernel) ReloadAgents() (stopped []string, err error) {
	if err := k.agents.Reload(); err != nil {
		return nil, err
	}
	var keep []mcp.ServerConfig
	for _, spec := range k.agents.List() {
		for _, srv := range spec.MCPServers {
			keep = append(keep, mcpConfig(srv))
		}
	}
	keep = append(keep, k.sessionMCP.configs()...) // the sessions' own servers stay

	return k.mcp.Retain(keep), nil
}
