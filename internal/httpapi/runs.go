package httpapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

type createRunRequest struct {
	// Input is a string, or a list of AG-UI content parts (see
	// readContent), read by runInput.
	Input     json.RawMessage `json:"input"`
	IfBusy    string          `json:"if_busy"`
	Overrides *overridesBody  `json:"overrides"`
	// Source is the client posting the run: api (the default), console
	// or cli.
	Source string `json:"source"`
	// Agent runs the input as another agent than the session's.
	Agent string `json:"agent"`
}

// Validate checks shape only; busy policies and bounds are the kernel's.
func (req createRunRequest) Validate() error {
	if noInput(req.Input) {
		return errdefs.Invalid("input", "required")
	}
	return checkSource(req.Overrides.check(nil), req.Source).Err()
}

// checkSource adds to v the problem with a client's run source, if any:
// a client says it is the API's, the console's or the CLI's; the other
// sources are the routes' and kerneld's own.
func checkSource(v *errdefs.ValidationError, source string) *errdefs.ValidationError {
	switch source {
	case "", session.RunSourceAPI, session.RunSourceConsole, session.RunSourceCLI:
		return v
	}
	return v.Add("source", "must be api, console or cli")
}

// runSource is the source of a run a client posted through a REST route.
func runSource(source string) string { return cmp.Or(source, session.RunSourceAPI) }

// noInput reports whether a run's input is missing, null or "".
func noInput(raw json.RawMessage) bool {
	switch string(raw) {
	case "", "null", `""`:
		return true
	}
	return false
}

// runInput reads the input of a run, a string or a list of content parts,
// and returns its text and its images, decoded and checked, each refusal
// naming its part.
func (s *Server) runInput(field string, raw json.RawMessage) (string, []images.Input, error) {
	c, problem := readContent(field, raw, strictJSON)
	if problem != nil {
		return "", nil, errdefs.Invalid(problem.field, problem.problem)
	}
	if c.text == "" && len(c.images) == 0 {
		return "", nil, errdefs.Invalid(field, "required")
	}
	ins, err := s.readImages(c.images, field)
	if err != nil {
		return "", nil, err
	}
	return c.text, ins, nil
}

type runErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type usageResponse struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type runResponse struct {
	ID             string            `json:"id"`
	SessionID      string            `json:"session_id"`
	State          session.RunState  `json:"state"`
	Status         session.Status    `json:"status"`
	Input          string            `json:"input"`
	IdempotencyKey *string           `json:"idempotency_key"`
	IfBusy         *string           `json:"if_busy"`
	SteeredInto    *string           `json:"steered_into"`
	Model          *string           `json:"model"`
	Overrides      overridesBody     `json:"overrides"`
	Kind           string            `json:"kind"`
	Source         *string           `json:"source"`
	CreatedAt      time.Time         `json:"created_at"`
	StartedAt      *time.Time        `json:"started_at"`
	EndedAt        *time.Time        `json:"ended_at"`
	Error          *runErrorResponse `json:"error"`
	Usage          usageResponse     `json:"usage"`
	StartSeq       *int64            `json:"start_seq"`
	EndSeq         *int64            `json:"end_seq"`
	Resumes        int               `json:"resumes"`
	Agent          string            `json:"agent,omitempty"`
}

func toRunResponse(r session.Run) runResponse {
	out := runResponse{
		ID: r.ID, SessionID: session.PublicID(r.SessionID), State: r.State, Status: session.RunStatusOf(&r), Input: r.Input,
		IdempotencyKey: nullable(r.IdempotencyKey), IfBusy: nullable(r.IfBusy), SteeredInto: nullable(r.SteeredInto),
		Model: nullable(r.Model), Overrides: toOverridesBody(r.Overrides), Kind: cmp.Or(r.Kind, "input"), Source: nullable(r.Source),
		CreatedAt: r.CreatedAt.UTC(),
		StartedAt: nullableTime(r.StartedAt), EndedAt: nullableTime(r.EndedAt),
		Usage:    usageResponse{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens},
		StartSeq: nullableSeq(r.StartSeq), EndSeq: nullableSeq(r.EndSeq), Resumes: r.Resumes, Agent: r.Agent,
	}
	if r.Error != nil {
		out.Error = &runErrorResponse{Code: r.Error.Code, Message: r.Error.Message}
	}
	return out
}

// handleRunCreate handles "POST /sessions/{id}/run". The run is
// asynchronous (202); with Accept: text/event-stream the response streams
// the run's events instead and ends after its last one.
func (s *Server) handleRunCreate(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[createRunRequest](r)
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
	return s.startRun(w, r, r.PathValue("id"), kernel.RunRequest{
		Input: input, Images: imgs, IfBusy: kernel.BusyPolicy(req.IfBusy), IdempotencyKey: key, Overrides: req.Overrides.toOverrides(),
		Source: runSource(req.Source), Agent: req.Agent,
	})
}

// startRun starts req on session id and answers as "POST
// /sessions/{id}/run" does: 202 with the run, or its events inline.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request, id string, req kernel.RunRequest) error {
	run, replayed, err := s.kernel.Run(r.Context(), id, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+session.PublicID(run.SessionID)+"/runs/"+run.ID)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if accepts(r, "text/event-stream") {
		return s.streamRun(w, r, run)
	}
	return writeJSON(w, http.StatusAccepted, toRunResponse(run))
}

// streamRun streams run's events until its end. A run whose RUN_STARTED
// is not recorded on it yet (queued, or starting) streams from an earlier
// run's start (see streamStart): nothing of it can be missed however soon
// it starts, and the stream passes over the other run's events.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, run session.Run) error {
	after, err := s.streamStart(r, run)
	if err != nil {
		return err
	}
	return s.streams.serve(w, r, s.kernel, streamRequest{sessionID: run.SessionID, after: after, runID: run.ID})
}

// recentRuns is how many of a session's newest runs streamStart looks at:
// enough to pass a full queue (sessions.max_queued, 8) and reach a run
// that started.
const recentRuns = 16

// streamStart returns the seq after which run's stream begins: just
// before its RUN_STARTED. A run answered before its start is recorded on
// it (queued behind another, or answered the moment it went running,
// which is before RUN_STARTED is logged) begins before the latest start
// of another run: a session's runs start one after another, so any other
// run that has started did so before this one, and a run that has
// started but not yet recorded it lets no other start until it ends.
// With none among the newest runs, the stream begins at the log's start.
func (s *Server) streamStart(r *http.Request, run session.Run) (int64, error) {
	if run.StartSeq > 0 {
		return run.StartSeq - 1, nil
	}
	runs, err := s.kernel.ListRuns(r.Context(), run.SessionID, kernel.PageRequest{Limit: recentRuns})
	if err != nil {
		return 0, err
	}
	var after int64
	for _, other := range runs.Items {
		switch {
		case other.ID == run.ID && other.StartSeq > 0:
			return other.StartSeq - 1, nil // recorded since it was answered
		case other.ID != run.ID && other.StartSeq > 0:
			after = max(after, other.StartSeq-1)
		}
	}
	return after, nil
}

// handleRunGet handles "GET /sessions/{id}/runs/{run_id}".
func (s *Server) handleRunGet(w http.ResponseWriter, r *http.Request) error {
	run, err := s.kernel.GetRun(r.Context(), r.PathValue("id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	out, err := s.runResponses(r, kernel.Page[session.Run]{Items: []session.Run{run}})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out.Data[0])
}

// handleRunCancel handles "POST /sessions/{id}/runs/{run_id}/cancel".
func (s *Server) handleRunCancel(w http.ResponseWriter, r *http.Request) error {
	run, err := s.kernel.CancelRun(r.Context(), r.PathValue("id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toRunResponse(run))
}

// accepts reports whether the request's Accept header names mediaType.
func accepts(r *http.Request, mediaType string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), mediaType) {
			return true
		}
	}
	return false
}

func nullableTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func nullableSeq(seq int64) *int64 {
	if seq == 0 {
		return nil
	}
	return &seq
}

// handleRunList handles "GET /sessions/{id}/runs".
func (s *Server) handleRunList(w http.ResponseWriter, r *http.Request) error {
	page, err := pageRequest(r)
	if err != nil {
		return err
	}
	f := kernel.RunFilter{State: session.RunState(r.URL.Query().Get("state"))}
	p, err := s.kernel.ListRunsWhere(r.Context(), r.PathValue("id"), f, page)
	if err != nil {
		return err
	}
	out, err := s.runResponses(r, p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}
