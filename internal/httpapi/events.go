package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
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
	if errdefs.CodeOf(err) == errdefs.CodeSessionNotFound && resumesStream(r) {
		// The session was deleted under the client's stream: there is
		// nothing more to send, and 204 stops an EventSource reconnecting.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	id = sess.ID // the key it is stored under
	after, err := eventCursor(r, sess.LastSeq)
	if err != nil {
		return err
	}
	if runID := r.URL.Query().Get("run_id"); runID != "" {
		if snapshot {
			return errdefs.Invalid("run_id", "cannot be combined with snapshot: a run's events start at its RUN_STARTED")
		}
		return s.handleRunEvents(w, r, id, runID, after)
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
	limit, err := eventPageLimit(r)
	if err != nil {
		return err
	}
	evs, err := s.kernel.Events(r.Context(), id, after, limit)
	if err != nil {
		return err
	}
	next := after
	if len(evs) > 0 {
		next = evs[len(evs)-1].Seq
	}
	return writeEvents(w, evs, next)
}

// eventPageLimit reads a JSON page's ?limit=.
func eventPageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultEventPage, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > kernel.MaxEventPage {
		return 0, errdefs.Invalid("limit", fmt.Sprintf("must be an integer from 1 to %d", kernel.MaxEventPage))
	}
	return n, nil
}

// writeEvents writes evs as one JSON page resuming after next.
func writeEvents(w http.ResponseWriter, evs []session.Event, next int64) error {
	page := eventPageResponse{Data: make([]json.RawMessage, len(evs)), NextAfter: next}
	for i := range evs {
		page.Data[i] = evs[i].AppendJSON(nil)
	}
	w.Header().Set("Cache-Control", "no-cache")
	return writeJSON(w, http.StatusOK, page)
}

// handleRunEvents serves "GET /sessions/{id}/events?run_id=": one run's
// events only, as a JSON page or as a stream that starts at the run's
// RUN_STARTED (or the cursor, if later) and ends after the run's end.
func (s *Server) handleRunEvents(w http.ResponseWriter, r *http.Request, id, runID string, after int64) error {
	if wantsEventPage(r) {
		limit, err := eventPageLimit(r)
		if err != nil {
			return err
		}
		evs, next, err := s.kernel.RunEvents(r.Context(), id, runID, after, limit)
		if err != nil {
			return err
		}
		return writeEvents(w, evs, next)
	}
	run, err := s.kernel.GetRun(r.Context(), id, runID)
	if err != nil {
		return err
	}
	if run.State.Terminal() && (run.StartSeq == 0 || after >= run.EndSeq) {
		// The client has the run's last event, or it never started:
		// nothing will follow. 204 stops an EventSource reconnecting.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if run.StartSeq > 0 {
		after = max(after, run.StartSeq-1)
	}
	return s.streams.serve(w, r, s.kernel, streamRequest{sessionID: id, after: after, runID: runID})
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
		return 0, errdefs.New(errdefs.ErrInvalid, errdefs.CodeCursorAhead,
			"%s %d is beyond the session's last event (seq %d)", name, n, lastSeq).With("last_seq", lastSeq)
	}
	return n, nil
}
