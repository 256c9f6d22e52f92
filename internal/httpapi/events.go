package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
)

// defaultEventPage is the page size of the JSON event pages.
const defaultEventPage = 100

type eventPageResponse struct {
	Data      []json.RawMessage `json:"data"`
	NextAfter int64             `json:"next_after"`
}

// handleEvents handles "GET /sessions/{id}/events": the session's event
// log as an SSE stream (the default), or as one JSON page when the client
// accepts application/json and not text/event-stream.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	snapshot, err := snapshotParam(r)
	if err != nil {
		return err
	}
	sess, err := s.kernel.GetSession(r.Context(), id)
	if errdefs.CodeOf(err) == "session_not_found" && resumesStream(r) {
		// The session was deleted under the client's stream: there is
		// nothing more to send, and 204 stops an EventSource reconnecting.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	after, err := eventCursor(r, sess.LastSeq)
	if err != nil {
		return err
	}
	if wantsEventPage(r) {
		return s.writeEventPage(w, r, id, after)
	}
	return s.streams.serve(w, r, s.kernel, streamRequest{sessionID: id, after: after, snapshot: snapshot})
}

// resumesStream reports whether r resumes an SSE stream: it carries a
// cursor (Last-Event-ID, or ?after=), so its client has read the session's
// stream before. Such a request for a session that is not found answers
// 204, whether the session was deleted or never visible to the caller:
// the answer tells nothing about other tenants' sessions.
func resumesStream(r *http.Request) bool {
	return !wantsEventPage(r) && (r.Header.Get("Last-Event-ID") != "" || r.URL.Query().Get("after") != "")
}

// writeEventPage writes the events after a cursor as one JSON page.
func (s *Server) writeEventPage(w http.ResponseWriter, r *http.Request, id string, after int64) error {
	limit := defaultEventPage
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > kernel.MaxEventPage {
			return errdefs.Invalid("limit", fmt.Sprintf("must be an integer from 1 to %d", kernel.MaxEventPage))
		}
		limit = n
	}
	evs, err := s.kernel.Events(r.Context(), id, after, limit)
	if err != nil {
		return err
	}
	page := eventPageResponse{Data: make([]json.RawMessage, len(evs)), NextAfter: after}
	for i := range evs {
		page.Data[i] = evs[i].AppendJSON(nil)
		page.NextAfter = evs[i].Seq
	}
	w.Header().Set("Cache-Control", "no-cache")
	return writeJSON(w, http.StatusOK, page)
}

// wantsEventPage reports whether the client asks for a JSON page rather
// than the stream: it accepts application/json and not text/event-stream.
func wantsEventPage(r *http.Request) bool {
	return accepts(r, "application/json") && !accepts(r, "text/event-stream")
}

// eventCursor returns the seq to resume after: the Last-Event-ID header
// (what a reconnecting EventSource sends), else ?after=, else 0. A cursor
// beyond lastSeq, the session's last event, is refused: served, the
// client would silently miss every event up to it.
func eventCursor(r *http.Request, lastSeq int64) (int64, error) {
	name, v := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if v == "" {
		name, v = "after", r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errdefs.Invalid(name, "must be a non-negative integer: the seq of the last event received")
	}
	if n > lastSeq {
		return 0, errdefs.New(errdefs.ErrInvalid, "cursor_ahead",
			"%s %d is beyond the session's last event (seq %d)", name, n, lastSeq).With("last_seq", lastSeq)
	}
	return n, nil
}
