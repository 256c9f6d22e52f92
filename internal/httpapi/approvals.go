package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
)

type decideRequest struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// SameArguments limits an "always" to calls with these arguments.
	SameArguments bool `json:"same_arguments"`
}

// Validate checks that the decision is one of the three.
func (req decideRequest) Validate() error {
	switch {
	case req.Decision != kernel.DecisionApprove && req.Decision != kernel.DecisionDeny && req.Decision != kernel.DecisionAlways:
		return errdefs.Invalid("decision", `must be "approve", "deny" or "always" (approve this tool for the rest of the session)`)
	case req.SameArguments && req.Decision != kernel.DecisionAlways:
		return errdefs.Invalid("same_arguments", `only goes with the decision "always"`)
	}
	return nil
}

type approvalResponse struct {
	ToolCallID  string          `json:"tool_call_id"`
	ToolName    string          `json:"tool_name"`
	Arguments   json.RawMessage `json:"arguments"`
	State       string          `json:"state"`
	Reason      *string         `json:"reason"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   *time.Time      `json:"expires_at"`
	DecidedAt   *time.Time      `json:"decided_at"`
}

func toApprovalResponse(a kernel.Approval) approvalResponse {
	args := a.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return approvalResponse{
		ToolCallID: a.ToolCallID, ToolName: a.ToolName, Arguments: args, State: a.State,
		Reason: nullable(a.Reason), RequestedAt: a.RequestedAt.UTC(),
		ExpiresAt: nullableTime(a.ExpiresAt), DecidedAt: nullableTime(a.DecidedAt),
	}
}

type approvalListResponse struct {
	Data []approvalResponse `json:"data"`
}

// handleApprovalList handles "GET /sessions/{id}/runs/{run_id}/approvals".
func (s *Server) handleApprovalList(w http.ResponseWriter, r *http.Request) error {
	all, err := s.kernel.Approvals(r.Context(), r.PathValue("id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	out := approvalListResponse{Data: make([]approvalResponse, len(all))}
	for i, a := range all {
		out.Data[i] = toApprovalResponse(a)
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleApprovalDecide handles
// "POST /sessions/{id}/runs/{run_id}/approvals/{tool_call_id}".
func (s *Server) handleApprovalDecide(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[decideRequest](r)
	if err != nil {
		return err
	}
	a, err := s.kernel.DecideWith(r.Context(), r.PathValue("id"), r.PathValue("run_id"), r.PathValue("tool_call_id"),
		kernel.Verdict{Decision: req.Decision, SameArguments: req.SameArguments, Reason: req.Reason})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toApprovalResponse(a))
}
