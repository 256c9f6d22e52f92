package httpapi

import (
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
}

type agentLimitsResponse struct {
	MaxChildren       int   `json:"max_children"`
	MaxDepth          int   `json:"max_depth"`
	RunTimeoutSeconds int64 `json:"run_timeout_seconds"`
}

// agentResponse describes an agent. It is built field by field: the spec
// holds the expanded API key, which must never reach a client.
type agentResponse struct {
	Name               string              `json:"name"`
	Description        string              `json:"description"`
	Model              agentModelResponse  `json:"model"`
	Tools              []agentToolResponse `json:"tools"`
	MaxTurns           int                 `json:"max_turns"`
	Limits             agentLimitsResponse `json:"limits"`
	MaxHistoryMessages int                 `json:"max_history_messages"`
	Available          bool                `json:"available"`
	UnavailableReason  *string             `json:"unavailable_reason"`
}

func (s *Server) toAgentResponse(a agents.Spec) agentResponse {
	out := agentResponse{
		Name: a.Name, Description: a.Description,
		Model:    agentModelResponse{Provider: a.Model.Provider, Name: a.Model.Name},
		Tools:    make([]agentToolResponse, 0, len(a.Tools)),
		MaxTurns: a.MaxTurns,
		Limits: agentLimitsResponse{
			MaxChildren: a.Limits.MaxChildren, MaxDepth: a.Limits.MaxDepth,
			RunTimeoutSeconds: int64(a.Limits.RunTimeout.Seconds()),
		},
		MaxHistoryMessages: a.Memory.MaxHistoryMessages,
		Available:          a.Unavailable == "", UnavailableReason: nullable(a.Unavailable),
	}
	for _, ref := range a.Tools {
		d, _ := s.kernel.ToolDefinition(a, ref.Name)
		out.Tools = append(out.Tools, agentToolResponse{
			Name: ref.Name, Description: d.Description, Parameters: d.Parameters, RequireApproval: ref.RequireApproval,
		})
	}
	return out
}

type agentListResponse struct {
	Data []agentResponse `json:"data"`
}

// handleAgentList handles "GET /agents".
func (s *Server) handleAgentList(w http.ResponseWriter, r *http.Request) error {
	specs := s.kernel.Agents()
	out := agentListResponse{Data: make([]agentResponse, len(specs))}
	for i, a := range specs {
		out.Data[i] = s.toAgentResponse(a)
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleAgentGet handles "GET /agents/{name}".
func (s *Server) handleAgentGet(w http.ResponseWriter, r *http.Request) error {
	a, err := s.kernel.Agent(r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.toAgentResponse(a))
}
