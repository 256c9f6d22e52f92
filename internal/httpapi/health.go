package httpapi

import (
	"net/http"

	"github.com/kerneld/kerneld/internal/errdefs"
)

type statusResponse struct {
	Status  string `json:"status"`
	Version string `json:"version,omitempty"`
}

// handleHealth handles "GET /healthz": the process is up. It needs no auth
// so orchestrators can probe it.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, statusResponse{Status: "ok", Version: s.opts.Version})
}

// handleReady handles "GET /readyz": kerneld can serve requests now.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	if err := s.kernel.Ready(r.Context()); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, statusResponse{Status: "ready", Version: s.opts.Version})
}

// handleMetrics handles "GET /metrics" (Prometheus text format).
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Metrics == nil {
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeMetricsDisabled, "metrics are not served on this listener")
	}
	s.opts.Metrics.ServeHTTP(w, r)
	return nil
}

// handleOpenAPI handles "GET /openapi.yaml": the API's contract.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) error {
	if len(s.opts.OpenAPI) == 0 {
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeOpenAPIUnavailable, "the OpenAPI document is not embedded in this build")
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.opts.OpenAPI) // the client may be gone
	return nil
}
