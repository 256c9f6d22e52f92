package httpapi

import (
	"net/http"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// writeSessions writes a page of sessions with their statuses.
func (s *Server) writeSessions(w http.ResponseWriter, r *http.Request, p kernel.Page[session.Session]) error {
	views, err := s.kernel.SessionViews(r.Context(), p.Items)
	if err != nil {
		return err
	}
	reader := readerFrom(r)
	out := toList(p, func(s session.Session) sessionResponse { return toSessionResponse(s, reader) })
	for i := range out.Data {
		out.Data[i].Status, out.Data[i].QueuedRuns = views[i].Status, views[i].QueuedRuns
	}
	return writeJSON(w, http.StatusOK, out)
}

// writeSession writes sess as the caller sees it, with the status and
// queued runs the kernel derives.
func (s *Server) writeSession(w http.ResponseWriter, r *http.Request, sess session.Session) error {
	views, err := s.kernel.SessionViews(r.Context(), []session.Session{sess})
	if err != nil {
		return err
	}
	out := toSessionResponse(sess, readerFrom(r))
	out.Status, out.QueuedRuns = views[0].Status, views[0].QueuedRuns
	withMCPStatus(out.MCPServers, s.kernel.SessionMCPStatus(sess))
	return writeJSON(w, http.StatusOK, out)
}

// runResponses converts runs, all of the request's session, with the
// statuses the kernel derives (converting a run alone gives it the status
// its record says).
func (s *Server) runResponses(r *http.Request, p kernel.Page[session.Run]) (listResponse[runResponse], error) {
	out := toList(p, toRunResponse)
	statuses, err := s.kernel.RunStatuses(r.Context(), p.Items)
	if err != nil {
		return out, err
	}
	for i := range out.Data {
		out.Data[i].Status = statuses[i]
	}
	return out, nil
}

// handleChildren handles "GET /sessions/{id}/children".
func (s *Server) handleChildren(w http.ResponseWriter, r *http.Request) error {
	page, err := pageRequest(r)
	if err != nil {
		return err
	}
	p, err := s.kernel.Children(r.Context(), r.PathValue("id"), page)
	if err != nil {
		return err
	}
	return s.writeSessions(w, r, p)
}
