package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/kerneld/kerneld/internal/agents"
)

type agentModelResponse struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

type agentToolResponse struct {
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Parameters      json.RawMessage `json:"parameters"`
	RequireApproval bool            `json:"require_approval"`
	MCPServer       *string         `json:"mcp_server"`
}

type agentMCPServerResponse struct {
	Name      string  `json:"name"`
	Transport string  `json:"transport"`
	State     string  `json:"state"`
	Error     *string `json:"error"`
}

type agentLimitsResponse struct {
	MaxChildren       int   `json:"max_children"`
	MaxDepth          int   `json:"max_depth"`
	RunTimeoutSeconds int64 `json:"run_timeout_seconds"`
}

// agentResponse describes an agent. It is built field by field: the spec
// holds the expanded API key, which must never reach a client.
type agentResponse struct {
	Name               string                   `json:"name"`
	Description        string                   `json:"description"`
	Model              agentModelResponse       `json:"model"`
	Tools              []agentToolResponse      `json:"tools"`
	MaxTurns           int                      `json:"max_turns"`
	Limits             agentLimitsResponse      `json:"limits"`
	MaxHistoryMessages int                      `json:"max_history_messages"`
	Available          bool                     `json:"available"`
	UnavailableReason  *string                  `json:"unavailable_reason"`
	MCPServers         []agentMCPServerResponse `json:"mcp_servers"`
	Overrides          agentOverridesResponse   `json:"overrides"`
	// PermissionModes are the modes its sessions may choose.
	PermissionModes []string `json:"permission_modes"`
	// Peers may take turns with it on one conversation; ChildResults says
	// how a background child's answer reaches its busy sessions.
	Peers        []string `json:"peers,omitempty"`
	ChildResults string   `json:"child_results,omitempty"`
}

// agentOverridesResponse lists what a client may choose in `overrides`.
type agentOverridesResponse struct {
	Models          []string `json:"models"`
	ReasoningEffort bool     `json:"reasoning_effort"`
	Temperature     bool     `json:"temperature"`
	MaxTokens       bool     `json:"max_tokens"`
}

// toAgentOverrides lists the models a client may pick, the agent's own
// first, and the settings it may choose.
func toAgentOverrides(a agents.Spec) agentOverridesResponse {
	models := []string{a.Model.Name}
	for _, m := range a.Overrides.Models {
		if m != a.Model.Name {
			models = append(models, m)
		}
	}
	p := a.Overrides
	return agentOverridesResponse{Models: models, ReasoningEffort: p.ReasoningEffort, Temperature: p.Temperature, MaxTokens: p.MaxTokens}
}

// toAgentResponse describes agent a. With startMCP, its MCP servers are
// started so that their tools can be listed.
func (s *Server) toAgentResponse(ctx context.Context, a agents.Spec, startMCP bool) agentResponse {
	tools, servers := s.kernel.AgentTools(ctx, a, startMCP)
	out := agentResponse{
		Name: a.Name, Description: a.Description,
		Model:    agentModelResponse{Provider: a.Model.Provider, Name: a.Model.Name},
		Tools:    make([]agentToolResponse, len(tools)),
		MaxTurns: a.MaxTurns,
		Limits: agentLimitsResponse{
			MaxChildren: a.Limits.MaxChildren, MaxDepth: a.Limits.MaxDepth,
			RunTimeoutSeconds: int64(a.Limits.RunTimeout.Seconds()),
		},
		MaxHistoryMessages: a.Memory.MaxHistoryMessages,
		Available:          a.Unavailable == "", UnavailableReason: nullable(a.Unavailable),
		MCPServers:      make([]agentMCPServerResponse, len(servers)),
		Overrides:       toAgentOverrides(a),
		PermissionModes: a.AllowedPermissionModes(),
		Peers:           a.Peers, ChildResults: a.ChildResults,
	}
	for i, t := range tools {
		out.Tools[i] = agentToolResponse{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters,
			RequireApproval: t.RequireApproval, MCPServer: nullable(t.Server),
		}
	}
	for i, st := range servers {
		out.MCPServers[i] = agentMCPServerResponse{Name: st.Name, Transport: st.Transport, State: st.State}
		if st.Err != nil {
			out.MCPServers[i].Error = nullable(st.Err.Error())
		}
	}
	return out
}

type agentListResponse struct {
	Data []agentResponse `json:"data"`
}

// handleAgentList handles "GET /agents". It starts no MCP server: a
// server's tools are listed once a run or GET /agents/{name} started it.
func (s *Server) handleAgentList(w http.ResponseWriter, r *http.Request) error {
	specs := s.kernel.Agents()
	out := agentListResponse{Data: make([]agentResponse, len(specs))}
	for i, a := range specs {
		out.Data[i] = s.toAgentResponse(r.Context(), a, false)
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleAgentGet handles "GET /agents/{name}". It starts the agent's MCP
// servers, so that it lists their tools, or the error that kept one from
// starting.
func (s *Server) handleAgentGet(w http.ResponseWriter, r *http.Request) error {
	a, err := s.kernel.Agent(r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.toAgentResponse(r.Context(), a, true))
}
