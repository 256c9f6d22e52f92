package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/quota"
)

// limitRequests takes a unit of the tenant's request bucket for every
// request and advertises the bucket in the RateLimit-Policy and RateLimit
// fields of the IETF draft (draft-ietf-httpapi-ratelimit-headers-10):
//
//	RateLimit-Policy: "requests";q=100;w=2
//	RateLimit: "requests";r=57;t=1
//
// q is the burst, w the seconds an empty bucket takes to fill, r the
// requests left now and t the seconds until the bucket is full again, or,
// on a 429, until a request is let through (as Retry-After says).
func (s *Server) limitRequests(next http.Handler) http.Handler {
	if s.opts.Quotas.Limits().RequestsPerSecond <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := s.opts.Quotas.AllowRequest(r.Context(), kernel.TenantFrom(r.Context()))
		if ok {
			h := w.Header()
			h.Set("RateLimit-Policy", fmt.Sprintf(`"requests";q=%d;w=%d`, p.Quota, ceilSeconds(p.Window)))
			h.Set("RateLimit", fmt.Sprintf(`"requests";r=%d;t=%d`, p.Remaining, ceilSeconds(p.Reset)))
		}
		if errdefs.CodeOf(err) == errdefs.CodeRateLimited {
			s.writeError(w, r, err)
			return
		}
		// Any other error is the bucket's store failing (Redis refusing
		// writes or gone): the request goes on unmetered, so that reads
		// and the routes' own answers (503 storage_unavailable for
		// writes) still reach the client during the outage.
		next.ServeHTTP(w, r)
	})
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// setRetryAfter sets Retry-After from a quota's refusal.
func setRetryAfter(w http.ResponseWriter, err error) {
	if secs, ok := quota.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
}

// tenantUsageResponse is the body of GET /usage.
type tenantUsageResponse struct {
	Tenant string      `json:"tenant"`
	Limits usageLimits `json:"limits"`
	Usage  usageCounts `json:"usage"`
}

// usageLimits are the tenant's limits; 0 is none.
type usageLimits struct {
	RequestsPerSecond float64 `json:"requests_per_second"`
	RequestBurst      int     `json:"request_burst"`
	MaxSessions       int     `json:"max_sessions"`
	RunsPerMinute     int     `json:"runs_per_minute"`
	MaxConcurrentRuns int     `json:"max_concurrent_runs"`
	MaxStreams        int     `json:"max_streams"`
	TokensPerDay      int64   `json:"tokens_per_day"`
}

// usageCounts are what the tenant uses now. A null *_available has no
// limit.
type usageCounts struct {
	RequestsAvailable *int  `json:"requests_available"`
	Sessions          int   `json:"sessions"`
	RunsAvailable     *int  `json:"runs_available"`
	ConcurrentRuns    int   `json:"concurrent_runs"`
	Streams           int   `json:"streams"`
	TokensToday       int64 `json:"tokens_today"`
}

// handleUsage handles "GET /usage": the caller's tenant's use of each
// limit, and the limits.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	tenant := kernel.TenantFrom(ctx)
	stored, err := s.kernel.CountSessions(ctx)
	if err != nil {
		return err
	}
	u, err := s.opts.Quotas.Usage(ctx, tenant, stored)
	if err != nil {
		return err
	}
	l := u.Limits
	return writeJSON(w, http.StatusOK, tenantUsageResponse{
		Tenant: tenant,
		Limits: usageLimits{
			RequestsPerSecond: l.RequestsPerSecond, RequestBurst: l.RequestBurst, MaxSessions: l.MaxSessions,
			RunsPerMinute: l.RunsPerMinute, MaxConcurrentRuns: l.MaxConcurrentRuns,
			MaxStreams: s.opts.MaxStreamsPerTenant, TokensPerDay: l.TokensPerDay,
		},
		Usage: usageCounts{
			RequestsAvailable: orNull(u.RequestsAvailable), Sessions: u.Sessions, RunsAvailable: orNull(u.RunsAvailable),
			ConcurrentRuns: u.ConcurrentRuns, Streams: s.slots.of(tenant), TokensToday: u.TokensToday,
		},
	})
}

// orNull is nil for -1 (no limit), else &n.
func orNull(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}
