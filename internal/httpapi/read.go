package httpapi

import (
	"math"
	"net/http"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// readSessionRequest is how far the caller has read a session's log.
type readSessionRequest struct {
	// Seq is the seq of the last event read; left out, everything
	// logged so far.
	Seq *int64 `json:"seq"`
}

// Validate implements validator.
func (req readSessionRequest) Validate() error {
	if req.Seq != nil && *req.Seq < 0 {
		return errdefs.Invalid("seq", "must be 0 or more (the seq of the last event read)")
	}
	return nil
}

// handleSessionRead handles "PUT /sessions/{id}/read": it moves the
// caller's read cursor forward (never back) and answers the session as
// the caller sees it then, with its unread count.
func (s *Server) handleSessionRead(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeOptional[readSessionRequest](r)
	if err != nil {
		return err
	}
	seq := int64(math.MaxInt64) // bounded by the session's last seq
	if req.Seq != nil {
		seq = *req.Seq
	}
	sess, err := s.kernel.MarkRead(r.Context(), r.PathValue("id"), readerFrom(r), seq)
	if err != nil {
		return err
	}
	return s.writeSession(w, r, sess)
}
