package httpapi

import (
	"net/http"

	"github.com/kerneld/kerneld/internal/kernel"
)

// clearSessionRequest is the optional body of POST /sessions/{id}/clear.
type clearSessionRequest struct {
	// Memory clears the session's memory with its history; it is kept
	// when left out.
	Memory bool `json:"memory"`
}

func (clearSessionRequest) Validate() error { return nil }

// clearResponse is the answer of POST /sessions/{id}/clear: the run that
// cleared, once it ended, and the clear entry it added to the history
// (null when the run failed before adding it; its error says why).
type clearResponse struct {
	Run   runResponse      `json:"run"`
	Clear *messageResponse `json:"clear"`
}

// handleSessionClear handles "POST /sessions/{id}/clear". It answers once
// the clear run has ended; a busy session is 409 session_busy.
func (s *Server) handleSessionClear(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeOptional[clearSessionRequest](r)
	if err != nil {
		return err
	}
	run, entry, err := s.kernel.Clear(r.Context(), r.PathValue("id"), kernel.ClearRequest{Memory: req.Memory})
	if err != nil {
		return err
	}
	out := clearResponse{Run: toRunResponse(run)}
	if entry != nil {
		m := toMessageResponse(*entry)
		out.Clear = &m
	}
	return writeJSON(w, http.StatusOK, out)
}
