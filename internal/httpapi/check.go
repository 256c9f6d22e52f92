package httpapi

import (
	"net/http"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
)

type problemResponse struct {
	Kind       string  `json:"kind"`
	Seq        *int64  `json:"seq"`
	RunID      *string `json:"run_id"`
	ToolCallID *string `json:"tool_call_id"`
	Detail     string  `json:"detail"`
	Repairable bool    `json:"repairable"`
}

type checkResponse struct {
	SessionID string            `json:"session_id"`
	LastSeq   int64             `json:"last_seq"`
	Events    int               `json:"events"`
	Healthy   bool              `json:"healthy"`
	Problems  []problemResponse `json:"problems"`
}

type repairRequest struct {
	DryRun *bool `json:"dry_run"`
}

// Validate requires dry_run, so that no client repairs by forgetting it.
func (req repairRequest) Validate() error {
	if req.DryRun == nil {
		return errdefs.Invalid("dry_run", "required: true to see what repair would do, false to do it")
	}
	return nil
}

type repairActionResponse struct {
	Kind   string  `json:"kind"`
	RunID  *string `json:"run_id"`
	Detail string  `json:"detail"`
}

type repairResponse struct {
	DryRun    bool                   `json:"dry_run"`
	Actions   []repairActionResponse `json:"actions"`
	Remaining []problemResponse      `json:"remaining"`
}

func toProblems(ps []kernel.Problem) []problemResponse {
	out := make([]problemResponse, len(ps))
	for i, p := range ps {
		out[i] = problemResponse{Kind: p.Kind, Seq: nullableSeq(p.Seq), RunID: nullable(p.RunID),
			ToolCallID: nullable(p.ToolCallID), Detail: p.Detail, Repairable: p.Repairable}
	}
	return out
}

// handleSessionCheck handles "GET /sessions/{id}/check".
func (s *Server) handleSessionCheck(w http.ResponseWriter, r *http.Request) error {
	d, err := s.kernel.Check(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, checkResponse{SessionID: d.SessionID, LastSeq: d.LastSeq, Events: d.Events,
		Healthy: len(d.Problems) == 0, Problems: toProblems(d.Problems)})
}

// handleSessionRepair handles "POST /sessions/{id}/repair".
func (s *Server) handleSessionRepair(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[repairRequest](r)
	if err != nil {
		return err
	}
	rep, err := s.kernel.Repair(r.Context(), r.PathValue("id"), *req.DryRun)
	if err != nil {
		return err
	}
	out := repairResponse{DryRun: rep.DryRun, Actions: make([]repairActionResponse, len(rep.Actions)), Remaining: toProblems(rep.Remaining)}
	for i, a := range rep.Actions {
		out.Actions[i] = repairActionResponse{Kind: a.Kind, RunID: nullable(a.RunID), Detail: a.Detail}
	}
	return writeJSON(w, http.StatusOK, out)
}
