package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/quota"
)

// Kinds that are HTTP's own concern, so they live here, not in errdefs.
var (
	errUnauthorized     = errors.New("unauthorized")       // no valid API key
	errForbidden        = errors.New("forbidden")          // a valid key, but not for this route
	errRequestTimeout   = errors.New("request timeout")    // the request body came too slowly
	errMethodNotAllowed = errors.New("method not allowed") // a known path, another method
)

// errorKinds maps error kinds to statuses and default codes; first match
// wins. An error without a kind is a 500 whose detail stays in the logs.
var errorKinds = []struct {
	kind   error
	status int
	code   errdefs.Code
}{
	{errUnauthorized, http.StatusUnauthorized, errdefs.CodeUnauthorized},
	{errForbidden, http.StatusForbidden, errdefs.CodeForbidden},
	{errdefs.ErrInvalid, http.StatusBadRequest, errdefs.CodeInvalidRequest},
	{errRequestTimeout, http.StatusRequestTimeout, errdefs.CodeRequestTimeout},
	{errdefs.ErrNotFound, http.StatusNotFound, errdefs.CodeNotFound},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, errdefs.CodeMethodNotAllowed},
	{errdefs.ErrConflict, http.StatusConflict, errdefs.CodeConflict},
	{errdefs.ErrUnprocessable, http.StatusUnprocessableEntity, errdefs.CodeUnprocessable},
	{errdefs.ErrExhausted, http.StatusTooManyRequests, errdefs.CodeLimitExceeded},
	{errdefs.ErrUnavailable, http.StatusServiceUnavailable, errdefs.CodeUnavailable},
	{errdefs.ErrUpstream, http.StatusBadGateway, errdefs.CodeUpstreamError},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, errdefs.CodeTimeout},
}

// retryStorageAfter is the Retry-After, in seconds, of a refusal while the
// store cannot take writes: a run waiting to record its end tries again at
// most 5 s apart, so a client a second later finds it as soon as most do.
const retryStorageAfter = "1"

// problem is an RFC 9457 problem details body.
type problem struct {
	Type      string            `json:"type"`
	Title     string            `json:"title"`
	Status    int               `json:"status"`
	Detail    string            `json:"detail"`
	Code      errdefs.Code      `json:"code"`
	Instance  string            `json:"instance,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
	Errors    map[string]string `json:"errors,omitempty"`
	extra     map[string]any
}

// problemFor classifies err.
func problemFor(err error) problem {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return newProblem(http.StatusRequestEntityTooLarge, errdefs.CodeBodyTooLarge,
			"request body is larger than "+formatBytes(mbe.Limit))
	}
	p := newProblem(http.StatusInternalServerError, errdefs.CodeInternal, "internal error")
	for _, k := range errorKinds {
		if errors.Is(err, k.kind) {
			p = newProblem(k.status, k.code, err.Error())
			break
		}
	}
	if e, ok := errors.AsType[*errdefs.Error](err); ok && p.Status != http.StatusInternalServerError {
		p.Code, p.extra = e.Code, e.Extra
	}
	if ve, ok := errors.AsType[*errdefs.ValidationError](err); ok {
		p.Errors = ve.Problems
	}
	if se, ok := errors.AsType[*errdefs.StorageError](err); ok {
		p.Code, p.Detail = errdefs.CodeStorageUnavailable, se.Detail()
	}
	p.Type = problemType(p.Code)
	return p
}

// problemType is the problem's type URI: one per stable code.
func problemType(code errdefs.Code) string { return "urn:kerneld:problem:" + string(code) }

func newProblem(status int, code errdefs.Code, detail string) problem {
	return problem{Type: problemType(code), Title: http.StatusText(status), Status: status, Detail: detail, Code: code}
}

// MarshalJSON adds the extension members to the standard ones.
func (p problem) MarshalJSON() ([]byte, error) {
	type plain problem
	return marshalWithExtra(plain(p), p.extra)
}

// writeError writes err as application/problem+json and logs it once: 4xx
// at Info, 5xx at Error with the full error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := writeProblem(w, r, err)
	level := slog.LevelInfo
	if p.Status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "request failed", "status", p.Status, "code", p.Code, "err", err,
		"request_id", p.RequestID)
	s.announceQuota(r, err)
}

// announceQuota has the kernel announce a refusal by one of the tenant's
// quotas (an amount, or the rate of runs) to the webhooks that want
// quota.exceeded; the request rate, refused in floods, is not announced.
func (s *Server) announceQuota(r *http.Request, err error) {
	e, ok := errors.AsType[*errdefs.Error](err)
	if !ok || s.kernel == nil {
		return
	}
	limit, _ := e.Extra["limit"].(string)
	if e.Code != errdefs.CodeQuotaExceeded && (e.Code != errdefs.CodeRateLimited || limit == quota.LimitRequests) {
		return
	}
	s.kernel.AnnounceQuotaExceeded(r.Context(), r.PathValue("id"), limit, e.Message)
}

// writeProblem writes err as application/problem+json, and logs nothing:
// for refusals that come in floods and are logged in summary.
func writeProblem(w http.ResponseWriter, r *http.Request, err error) problem {
	p := problemFor(err)
	p.Instance = r.URL.Path
	p.RequestID = middleware.GetReqID(r.Context())
	w.Header().Set("Content-Type", "application/problem+json")
	setRetryAfter(w, err)
	if p.Status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close") // the rest of the body is not worth waiting for
	}
	if p.Code == errdefs.CodeStorageUnavailable {
		w.Header().Set("Retry-After", retryStorageAfter)
	}
	_ = writeBody(w, p.Status, p) // a problem always marshals
	return p
}
