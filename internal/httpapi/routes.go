package httpapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// routes is the whole API surface. Keep it in step with api/openapi.yaml;
// TestRoutesMatchOpenAPI checks that it is.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	// authenticate runs before routing: without a key, no path or method
	// is told apart from another (only /healthz and the console's files are
	// open). cors runs before
	// it: a browser's preflight carries no key.
	r.Use(middleware.RequestID, s.traceRequests, s.logRequests, s.recoverPanics, s.cors, s.authenticate, s.paceBody, s.limitBody, s.checkQuery)
	r.NotFound(s.handle(s.handleNotFound))
	r.MethodNotAllowed(s.handle(s.handleMethodNotAllowed))
	r.Get("/healthz", s.handle(s.handleHealth))
	r.Get("/readyz", s.handle(s.handleReady))
	r.Get("/openapi.yaml", s.handle(s.handleOpenAPI))
	r.With(s.requireOperator).Get("/metrics", s.handle(s.handleMetrics))
	r.Get("/", s.handle(s.handleConsoleIndex)) // the web console: no key needed
	r.Get(consolePrefix+"{file}", s.handle(s.handleConsoleFile))
	r.Group(func(r chi.Router) {
		r.Use(s.requireTenant, s.limitRequests, s.strictQuery)
		r.With(s.timeout).Get("/usage", s.handle(s.handleUsage))
		// Streams: never under a timeout (it would cut them off).
		r.With(s.limitStreams).Get("/sessions/{id}/events", s.handle(s.handleEvents))
		r.With(s.limitStreams).Get("/sessions/events", s.handle(s.handleSessionFeed))
		r.With(s.limitStreams).Post("/sessions/{id}/run", s.handle(s.handleRunCreate))
		// A summary takes as long as the model does: no request timeout.
		r.Post("/sessions/{id}/compact", s.handle(s.handleSessionCompact))
		r.With(s.limitStreams).Post("/run", s.handle(s.handleOneCallRun))
		r.With(s.limitStreams).Post("/agents/{name}/agui", s.handle(s.handleAGUIRun))
		r.With(s.limitStreams).Post("/agents/{name}/ai-sdk", s.handle(s.handleAISDKChat))
		r.With(s.limitStreams).Get("/agents/{name}/ai-sdk/{id}/stream", s.handle(s.handleAISDKStream))
		r.Group(func(r chi.Router) {
			r.Use(s.timeout)
			r.Get("/agents", s.handle(s.handleAgentList))
			r.Get("/agents/{name}", s.handle(s.handleAgentGet))
			r.Post("/sessions", s.handle(s.handleSessionCreate))
			r.Get("/sessions", s.handle(s.handleSessionList))
			r.Get("/sessions/{id}", s.handle(s.handleSessionGet))
			r.Patch("/sessions/{id}", s.handle(s.handleSessionUpdate))
			r.Delete("/sessions/{id}", s.handle(s.handleSessionDelete))
			r.Put("/sessions/{id}/read", s.handle(s.handleSessionRead))
			r.Get("/sessions/{id}/state", s.handle(s.handleStateGet))
			r.Put("/sessions/{id}/state", s.handle(s.handleStatePut))
			r.Post("/sessions/{id}/close", s.handle(s.handleSessionClose))
			r.Post("/sessions/{id}/clear", s.handle(s.handleSessionClear))
			r.Post("/sessions/{id}/fork", s.handle(s.handleSessionFork))
			r.Post("/sessions/{id}/runs/{run_id}/regenerate", s.handle(s.handleRunRegenerate))
			r.Get("/sessions/{id}/check", s.handle(s.handleSessionCheck))
			r.Post("/sessions/{id}/repair", s.handle(s.handleSessionRepair))
			r.Get("/sessions/{id}/children", s.handle(s.handleChildren))
			r.Get("/sessions/{id}/runs", s.handle(s.handleRunList))
			r.Get("/sessions/{id}/runs/{run_id}", s.handle(s.handleRunGet))
			r.Post("/sessions/{id}/runs/{run_id}/cancel", s.handle(s.handleRunCancel))
			r.Get("/sessions/{id}/runs/{run_id}/approvals", s.handle(s.handleApprovalList))
			r.Post("/sessions/{id}/runs/{run_id}/approvals/{tool_call_id}", s.handle(s.handleApprovalDecide))
			r.Get("/approvals", s.handle(s.handleInbox))
			r.Get("/sessions/{id}/messages", s.handle(s.handleMessageList))
			r.Get("/sessions/{id}/transcript", s.handle(s.handleSessionTranscript))
			r.Post("/sessions/{id}/schedules", s.handle(s.handleScheduleCreate))
			r.Get("/sessions/{id}/schedules", s.handle(s.handleScheduleList))
			r.Get("/sessions/{id}/schedules/{schedule_id}", s.handle(s.handleScheduleGet))
			r.Delete("/sessions/{id}/schedules/{schedule_id}", s.handle(s.handleScheduleDelete))
			r.Get("/sessions/{id}/images", s.handle(s.handleImageList))
			r.Get("/sessions/{id}/images/{hash}", s.handle(s.handleImageGet))
			r.Get("/sessions/{id}/memory", s.handle(s.handleMemoryList))
			r.Get("/sessions/{id}/memory/*", s.handle(s.handleMemoryGet))
			r.Put("/sessions/{id}/memory/*", s.handle(s.handleMemoryPut))
			r.Delete("/sessions/{id}/memory/*", s.handle(s.handleMemoryDelete))
			r.Get("/webhooks/deliveries", s.handle(s.handleDeliveryList))
			r.Post("/webhooks/deliveries/{id}/redeliver", s.handle(s.handleDeliveryRedeliver))
		})
	})
	return r
}

// MetricsHandler serves opts.Metrics at GET /metrics alone, for a listener
// of its own (http.metrics_addr): operators scrape it on an address
// clients cannot reach. It authenticates as the API does, with the
// operator keys only: without opts.AdminKeys it is open.
func MetricsHandler(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	opts.APIKeys = nil // tenants' keys do not open metrics
	s := &Server{log: opts.Logger, opts: opts}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, s.traceRequests, s.logRequests, s.recoverPanics, s.authenticate)
	r.NotFound(s.handle(s.handleNotFound))
	r.MethodNotAllowed(s.handle(s.handleMethodNotAllowed))
	r.With(s.requireOperator).Get("/metrics", s.handle(s.handleMetrics))
	s.handler = r
	return r
}

// handleNotFound answers a path no route matches.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeRouteNotFound, "no route for %s %s", r.Method, r.URL.Path)
}

// handleMethodNotAllowed answers a known path with the wrong method,
// listing the methods it has in Allow.
func (s *Server) handleMethodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	var allowed []string
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodPatch, http.MethodPost, http.MethodPut} {
		if s.handler.(chi.Routes).Match(chi.NewRouteContext(), m, r.URL.Path) {
			allowed = append(allowed, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	return errdefs.New(errMethodNotAllowed, errdefs.CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
}

// Routes lists the API's routes as "METHOD /path" in chi's syntax, sorted,
// so the contract test can compare them with api/openapi.yaml.
func (s *Server) Routes() []string {
	var out []string
	_ = chi.Walk(s.routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, method+" "+route)
		return nil
	}) // the walk function never fails
	sort.Strings(out)
	return out
}
