package httpapi

import (
	"net/http"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
)

// inboxItemResponse is one approval of the inbox: the approval as the
// per-run route shows it, and where to decide it.
type inboxItemResponse struct {
	approvalResponse
	SessionID string `json:"session_id"`
	Agent     string `json:"agent"`
	RunID     string `json:"run_id"`
}

func toInboxItemResponse(it kernel.InboxItem) inboxItemResponse {
	return inboxItemResponse{approvalResponse: toApprovalResponse(it.Approval), SessionID: it.SessionID,
		Agent: it.Agent, RunID: it.RunID}
}

// handleInbox handles "GET /approvals".
func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request) error {
	if state := r.URL.Query().Get("state"); state != "" && state != kernel.ApprovalPending {
		return errdefs.Invalid("state", `must be "pending": the inbox lists the approvals waiting for a decision; a run's decided ones are at GET /sessions/{id}/runs/{run_id}/approvals`)
	}
	page, err := pageRequest(r)
	if err != nil {
		return err
	}
	p, err := s.kernel.Inbox(r.Context(), kernel.InboxRequest{Agent: r.URL.Query().Get("agent"), Page: page})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toList(p, toInboxItemResponse))
}
