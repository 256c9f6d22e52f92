package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// oneCallRunRequest is the body of "POST /run": a run of the session the
// client names, created for agent if it does not exist yet.
type oneCallRunRequest struct {
	Agent     string          `json:"agent"`
	Input     json.RawMessage `json:"input"` // as createRunRequest's
	SessionID string          `json:"session_id"`
	IfBusy    string          `json:"if_busy"`
	Source    string          `json:"source"` // as createRunRequest's
}

// Validate checks shape only; whether the agent exists is the kernel's call.
func (req oneCallRunRequest) Validate() error {
	var v *errdefs.ValidationError
	if req.Agent == "" {
		v = v.Add("agent", "required")
	}
	if noInput(req.Input) {
		v = v.Add("input", "required")
	}
	if req.SessionID != "" && !session.ValidClientID(req.SessionID) {
		v = v.Add("session_id", clientIDProblem)
	}
	return checkSource(checkNoNUL(v, "agent", req.Agent), req.Source).Err()
}

// handleOneCallRun handles "POST /run": it creates session session_id of
// agent unless the caller has it (another agent's is a conflict), then
// answers exactly as "POST /sessions/{id}/run" does. Without session_id
// each call gets a new session, unless it carries an Idempotency-Key:
// then a retry finds the session and the run of the first call.
func (s *Server) handleOneCallRun(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[oneCallRunRequest](r)
	if err != nil {
		return err
	}
	input, imgs, err := s.runInput("input", req.Input)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	run := kernel.RunRequest{Input: input, Images: imgs, IfBusy: kernel.BusyPolicy(req.IfBusy), IdempotencyKey: key, Source: runSource(req.Source)}
	if err := s.kernel.CheckRun(run); err != nil {
		return err
	}
	sess, _, err := s.kernel.EnsureSession(r.Context(), kernel.CreateSession{
		// The key names this route's session: the same key on "POST /sessions" is another request.
		Agent: req.Agent, ID: req.SessionID, IdempotencyKey: scopedKey("run", key),
	})
	if err != nil {
		return err
	}
	return s.startRun(w, r, sess.ID, run)
}

// scopedKey returns an Idempotency-Key of one route's, so the same key on
// another route names another request; "" stays "".
func scopedKey(route, key string) string {
	if key == "" {
		return ""
	}
	return route + ":" + key
}
