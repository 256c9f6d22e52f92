package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

type createScheduleRequest struct {
	At     *time.Time `json:"at"`
	Every  *string    `json:"every"`
	Input  string     `json:"input"`
	IfBusy *string    `json:"if_busy"`
}

// Validate checks shape only; bounds are the schedule service's.
func (req createScheduleRequest) Validate() error {
	if req.Every != nil {
		if _, err := time.ParseDuration(*req.Every); err != nil {
			return errdefs.Invalid("every", "must be a duration such as 90s, 15m, 1h30m or 24h")
		}
	}
	return nil
}

// spec returns the schedule the request asks for.
func (req createScheduleRequest) spec() schedule.Spec {
	spec := schedule.Spec{Input: req.Input, IfBusy: deref(req.IfBusy)}
	if req.At != nil {
		spec.At = *req.At
	}
	if req.Every != nil {
		spec.Every, _ = time.ParseDuration(*req.Every) // Validate parsed it
	}
	return spec
}

type firingResponse struct {
	At      time.Time `json:"at"`
	DueAt   time.Time `json:"due_at"`
	Outcome string    `json:"outcome"`
	RunID   *string   `json:"run_id"`
	Error   *string   `json:"error"`
}

type scheduleResponse struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"session_id"`
	At         *time.Time      `json:"at"`
	Every      *string         `json:"every"`
	Input      string          `json:"input"`
	IfBusy     string          `json:"if_busy"`
	NextAt     time.Time       `json:"next_at"`
	CreatedAt  time.Time       `json:"created_at"`
	Fired      int64           `json:"fired"`
	LastFiring *firingResponse `json:"last_firing"`
}

func toScheduleResponse(sch schedule.Schedule) scheduleResponse {
	out := scheduleResponse{ID: sch.ID, SessionID: session.PublicID(sch.SessionID), At: nullableTime(sch.At),
		Input: sch.Input, IfBusy: sch.IfBusy, NextAt: sch.NextAt.UTC(), CreatedAt: sch.CreatedAt.UTC(), Fired: sch.Fired}
	if sch.Every > 0 {
		every := formatEvery(sch.Every)
		out.Every = &every
	}
	if f := sch.Last; f != nil {
		out.LastFiring = &firingResponse{At: f.At.UTC(), DueAt: f.DueAt.UTC(), Outcome: f.Outcome,
			RunID: nullable(f.RunID), Error: nullable(f.Error)}
	}
	return out
}

// formatEvery writes an interval as clients write it: 1h30m, not 1h30m0s.
func formatEvery(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// schedules returns the schedule service, or refuses when the server has
// none.
func (s *Server) schedules() (*schedule.Service, error) {
	if s.opts.Schedules == nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, errdefs.CodeSchedulesUnavailable, "this server runs no schedules")
	}
	return s.opts.Schedules, nil
}

// scheduledSession returns the schedule service and the caller's session
// the path names.
func (s *Server) scheduledSession(r *http.Request) (*schedule.Service, session.Session, error) {
	svc, err := s.schedules()
	if err != nil {
		return nil, session.Session{}, err
	}
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	return svc, sess, err
}

// handleScheduleCreate handles "POST /sessions/{id}/schedules".
func (s *Server) handleScheduleCreate(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[createScheduleRequest](r)
	if err != nil {
		return err
	}
	svc, sess, err := s.scheduledSession(r)
	if err != nil {
		return err
	}
	sch, err := svc.Create(r.Context(), sess, req.spec())
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+session.PublicID(sess.ID)+"/schedules/"+sch.ID)
	return writeJSON(w, http.StatusCreated, toScheduleResponse(sch))
}

// handleScheduleList handles "GET /sessions/{id}/schedules".
func (s *Server) handleScheduleList(w http.ResponseWriter, r *http.Request) error {
	svc, sess, err := s.scheduledSession(r)
	if err != nil {
		return err
	}
	schs, err := svc.List(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	out := make([]scheduleResponse, len(schs))
	for i, sch := range schs {
		out[i] = toScheduleResponse(sch)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// handleScheduleGet handles "GET /sessions/{id}/schedules/{schedule_id}".
func (s *Server) handleScheduleGet(w http.ResponseWriter, r *http.Request) error {
	svc, sess, err := s.scheduledSession(r)
	if err != nil {
		return err
	}
	sch, err := svc.Get(r.Context(), sess.ID, r.PathValue("schedule_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toScheduleResponse(sch))
}

// handleScheduleDelete handles "DELETE /sessions/{id}/schedules/{schedule_id}".
func (s *Server) handleScheduleDelete(w http.ResponseWriter, r *http.Request) error {
	svc, sess, err := s.scheduledSession(r)
	if err != nil {
		return err
	}
	if err := svc.Delete(r.Context(), sess.ID, r.PathValue("schedule_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
