package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// traceRequests starts a server span per request, the child of the
// caller's W3C traceparent when it sends one, so that what the request
// starts (a run) joins the caller's trace. The span is named by the route
// once routing has matched it ("POST /sessions/{id}/run"), and ends with
// the response: for an event stream, when the stream ends. Without
// tracing configured it is not in the chain at all.
func (s *Server) traceRequests(next http.Handler) http.Handler {
	if s.opts.Tracing == nil || !s.opts.Tracing.Enabled() {
		return next
	}
	tracer, prop := s.opts.Tracing.Tracer(), s.opts.Tracing.Propagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path), attribute.String("url.scheme", scheme(r)),
				attribute.String("user_agent.original", r.UserAgent()),
				attribute.String("kerneld.request_id", middleware.GetReqID(ctx))))
		defer span.End()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(ctx))
		status := cmp.Or(ww.Status(), http.StatusOK)
		if route := chi.RouteContext(ctx).RoutePattern(); route != "" {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// scheme is the scheme the request came in with, as far as kerneld sees.
func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// logRequests logs one line per request once it completes.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		next.ServeHTTP(ww, r)
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", ww.Status()), slog.Int("bytes", ww.BytesWritten()),
			slog.Duration("duration", time.Since(start)),
			slog.String("request_id", middleware.GetReqID(r.Context())))
	})
}

// recoverPanics turns a handler panic into a 500 problem and one log line
// with the stack, so the daemon keeps serving. A response already under
// way is cut off instead: a problem body would corrupt it.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler || ww.Status() != 0 { //nolint:errorlint // a panic value, not an error chain
				panic(http.ErrAbortHandler) // net/http's own signal to abort the response
			}
			s.writeError(ww, r, fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack()))
		}()
		next.ServeHTTP(ww, r)
	})
}

// timeout bounds a request/response route. Handlers see the deadline in
// their context; a kernel call that runs out returns DeadlineExceeded,
// which writeError answers with 504. (chi's middleware.Timeout would
// write a second status after a handler that already answered.)
func (s *Server) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// limitBody caps every request body; reading past the cap fails with
// *http.MaxBytesError, which writeError answers with 413. A request that
// may carry images has the larger of the two caps.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.opts.MaxBodyBytes
		if takesImages(r) {
			limit = max(limit, s.opts.MaxImageBodyBytes)
		}
		if r.ContentLength > limit {
			s.writeError(w, r, &http.MaxBytesError{Limit: limit})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// takesImages reports whether r is for a route whose body may carry
// images: "POST /run", "POST /sessions/{id}/run" and "POST
// /agents/{name}/agui". The body limit applies before routing, so it
// matches the paths itself.
func takesImages(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch len(parts) {
	case 1:
		return parts[0] == "run"
	case 3:
		return parts[0] == "sessions" && parts[2] == "run" || parts[0] == "agents" && parts[2] == "agui"
	}
	return false
}

// checkQuery refuses a query string that does not parse, such as
// ?cursor=%zz: Go's parser would drop the bad pair, and the request would
// be served as if the parameter were absent, e.g. from the first page. It
// refuses values that are not UTF-8 text too (?agent=%ff).
func (s *Server) checkQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			s.writeError(w, r, errdefs.Invalid("query", "malformed: "+err.Error()))
			return
		}
		if err := checkQueryText(q); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
