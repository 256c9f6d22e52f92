package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// stateBody is a session's app state, as GET and PUT
// /sessions/{id}/state carry it.
type stateBody struct {
	State json.RawMessage `json:"state"`
}

// Validate implements validator; the size bound is the kernel's.
func (req stateBody) Validate() error {
	if req.State == nil {
		return errdefs.Invalid("state", "required: the app state, any JSON value")
	}
	return nil
}

// toStateBody is the state as the API shows it: null before any.
func toStateBody(state json.RawMessage) stateBody {
	if len(state) == 0 {
		state = json.RawMessage("null")
	}
	return stateBody{State: state}
}

// handleStateGet handles "GET /sessions/{id}/state".
func (s *Server) handleStateGet(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toStateBody(sess.AgentState))
}

// handleStatePut handles "PUT /sessions/{id}/state".
func (s *Server) handleStatePut(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[stateBody](r)
	if err != nil {
		return err
	}
	sess, err := s.kernel.SetSessionState(r.Context(), r.PathValue("id"), req.State)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toStateBody(sess.AgentState))
}
