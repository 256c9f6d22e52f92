package httpapi

import (
	"net/http"
)

// compactResponse is the answer of POST /sessions/{id}/compact: the run
// that compacted, once it ended, and the compaction entry it added to the
// history (null when there was nothing to compact or the summary failed;
// the run's error then says why).
type compactResponse struct {
	Run        runResponse      `json:"run"`
	Compaction *messageResponse `json:"compaction"`
}

// handleSessionCompact handles "POST /sessions/{id}/compact". It answers
// once the compaction run has ended; a busy session is 409.
func (s *Server) handleSessionCompact(w http.ResponseWriter, r *http.Request) error {
	run, entry, err := s.kernel.Compact(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := compactResponse{Run: toRunResponse(run)}
	if entry != nil {
		m := toMessageResponse(*entry)
		out.Compaction = &m
	}
	return writeJSON(w, http.StatusOK, out)
}
