// Package httpapi is the only package that knows HTTP: the routes, JSON
// and problem+json encoding, the SSE hub and writer, and middleware
// (request id, logging, recovery, auth, body limit). It holds no agent
// logic of its own; every decision is the kernel's.
package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	tenantfeed "github.com/kerneld/kerneld/internal/feed"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/telemetry"
	"github.com/kerneld/kerneld/internal/webhook"
)

// Options configure a Server. Zero values take the defaults noted.
type Options struct {
	Logger *slog.Logger
	// APIKeys maps a bearer token to its tenant. When empty, no
	// authentication is required and every caller is tenant "default".
	APIKeys map[string]string
	// AdminKeys are operator keys: they read /metrics and act as no
	// tenant. When set, /metrics needs one, with or without APIKeys.
	AdminKeys []string
	// UserHeader reads the reader of a request (read cursors, unread
	// counts) from X-Kerneld-User when the request has it: for a proxy
	// in front of kerneld that authenticates its users itself.
	UserHeader     bool
	MaxBodyBytes   int64         // default 1 MiB
	RequestTimeout time.Duration // request/response routes; default 30 s
	// ReadTimeout bounds reading a request body, counted from when the
	// request reaches the API; 0 leaves it to the http.Server. Set it to
	// the server's ReadTimeout.
	ReadTimeout time.Duration
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second, once BodyRateGrace has passed; 0 for no minimum.
	MinBodyRate   int64
	BodyRateGrace time.Duration
	// MaxStreams and MaxStreamsPerTenant bound the open event streams;
	// 0 for no bound.
	MaxStreams          int
	MaxStreamsPerTenant int
	// Feed serves GET /sessions/events; without it that route answers 503.
	Feed *tenantfeed.Service
	// CORSOrigins are the origins whose pages may call the API and read
	// its streams: scheme://host[:port], or "*" for any origin without
	// credentials. Empty allows none (see ValidateCORSOrigins).
	CORSOrigins []string
	// Quotas applies the tenants' quotas and rate limits; nil applies none.
	Quotas *quota.Limiter
	// Images checks the images of users' messages and serves those kept;
	// nil checks them under the default limits and keeps none.
	Images *images.Library
	// Schedules keeps the sessions' scheduled prompts; nil answers their
	// routes 503 schedules_unavailable.
	Schedules *schedule.Service
	// MaxImageBodyBytes bounds the body of a request that may carry
	// images (the run routes), in place of MaxBodyBytes when larger;
	// default 24 MiB, room for six images of the default size in base64.
	MaxImageBodyBytes int64
	Metrics           http.Handler // served at /metrics; nil answers 404
	// Webhooks serves /webhooks/deliveries; nil answers 404.
	Webhooks *webhook.Dispatcher
	// Tracing, when enabled, gives every request a server span.
	Tracing *telemetry.Tracing
	OpenAPI []byte // served at /openapi.yaml
	Version string
}

// DefaultTenant is the tenant of every caller when no API keys are set.
const DefaultTenant = "default"

// Server serves kerneld's HTTP API.
type Server struct {
	kernel  *kernel.Kernel
	streams *Streams
	log     *slog.Logger
	opts    Options
	slots   *streamSlots
	handler http.Handler
}

// New returns a server for k. streams must be one of k's observers, so
// that it sees every event.
func New(k *kernel.Kernel, streams *Streams, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Images == nil {
		opts.Images = images.New(nil, images.Limits{}, nil)
	}
	if opts.MaxImageBodyBytes <= 0 {
		opts.MaxImageBodyBytes = 24 << 20
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	s := &Server{kernel: k, streams: streams, log: opts.Logger, opts: opts,
		slots: newStreamSlots(opts.MaxStreams, opts.MaxStreamsPerTenant)}
	s.handler = s.routes()
	return s
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// CloseStreams ends every open event stream. Register it with
// http.Server.RegisterOnShutdown: Shutdown does not end streams itself and
// would wait for them until its deadline.
func (s *Server) CloseStreams() { s.streams.Close() }
