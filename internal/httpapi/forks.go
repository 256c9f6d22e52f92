package httpapi

import (
	"bytes"
	"io"
	"net/http"

	"github.com/kerneld/kerneld/internal/kernel"
)

type forkSessionRequest struct {
	AtMessage *int64 `json:"at_message"`
}

// Validate implements validator; whether the message exists is the
// kernel's call.
func (req forkSessionRequest) Validate() error { return nil }

type closeSessionRequest struct {
	Reason string `json:"reason"`
}

// Validate implements validator; the reason's bound is the kernel's.
func (req closeSessionRequest) Validate() error { return nil }

// regenerateResponse is the fork a regenerate created and the run
// answering the input again in it.
type regenerateResponse struct {
	Session sessionResponse `json:"session"`
	Run     runResponse     `json:"run"`
}

// forkedFromResponse says which session a fork came from and the position
// of the last message it kept.
type forkedFromResponse struct {
	SessionID       string `json:"session_id"`
	MessagePosition int64  `json:"message_position"`
}

// handleSessionFork handles "POST /sessions/{id}/fork".
func (s *Server) handleSessionFork(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeOptional[forkSessionRequest](r)
	if err != nil {
		return err
	}
	fork, err := s.kernel.ForkSession(r.Context(), r.PathValue("id"), kernel.ForkRequest{AtMessage: req.AtMessage})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+fork.ID)
	return writeJSON(w, http.StatusCreated, toSessionResponse(fork, readerFrom(r)))
}

// handleRunRegenerate handles "POST /sessions/{id}/runs/{run_id}/regenerate".
// Like cancel, it takes no body and ignores one.
func (s *Server) handleRunRegenerate(w http.ResponseWriter, r *http.Request) error {
	fork, run, err := s.kernel.Regenerate(r.Context(), r.PathValue("id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+fork.ID+"/runs/"+run.ID)
	return writeJSON(w, http.StatusAccepted, regenerateResponse{Session: toSessionResponse(fork, readerFrom(r)), Run: toRunResponse(run)})
}

// handleSessionClose handles "POST /sessions/{id}/close".
func (s *Server) handleSessionClose(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeOptional[closeSessionRequest](r)
	if err != nil {
		return err
	}
	sess, err := s.kernel.CloseSessionWithReason(r.Context(), r.PathValue("id"), req.Reason)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toSessionResponse(sess, readerFrom(r)))
}

// decodeOptional is decode for a body that may be left out: an empty
// body is the zero T.
func decodeOptional[T validator](r *http.Request) (T, error) {
	var zero T
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return zero, readError(err)
	}
	if len(body) == 0 {
		return zero, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decode[T](r)
}
