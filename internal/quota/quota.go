// Package quota holds each tenant's quotas and rate limits: requests per
// second, sessions stored, runs started per minute, concurrent runs and
// model tokens per day. A Limiter decides; a Backend keeps the counters,
// in this process (Memory) or in Redis (the redis store's Quotas), where
// every replica sharing the store sees the same counters.
//
// httpapi asks the Limiter before it serves a tenant's request; the
// kernel asks it before it creates a session or a run (admit.go), and
// tells it when a run executes and what its model calls spent. It knows nothing of HTTP: refusals are errdefs errors of kind
// ErrExhausted carrying a retry_after member, which httpapi turns into
// 429 and Retry-After.
package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Limits are the quotas of every tenant. A zero field is no limit.
type Limits struct {
	RequestsPerSecond float64 // the rate a tenant's requests refill its bucket
	RequestBurst      int     // the bucket's size; 0 takes RequestsPerSecond (at least 1)
	MaxSessions       int     // sessions stored, closed ones included
	RunsPerMinute     int     // runs started, with bursts up to the minute's worth
	MaxConcurrentRuns int     // runs executing or about to start at once
	TokensPerDay      int64   // model tokens (input and output), per UTC day
}

// DefaultLimits are the quotas where none are configured. They bound
// abuse, not use: one backend serving a few hundred users under one key
// (200 of them creating, streaming and running sessions at once is about
// 600 requests in a second and 200 concurrent runs) is never refused,
// while a runaway script, at thousands of requests per second or runs
// without end, is held to a rate the machine shrugs off. configs/kerneld.yaml
// gives the reasoning for each.
func DefaultLimits() Limits {
	return Limits{
		RequestsPerSecond: 500, RequestBurst: 2000,
		MaxSessions: 100_000, RunsPerMinute: 1200, MaxConcurrentRuns: 500,
		TokensPerDay: 10_000_000,
	}
}

// burst is the request bucket's size.
func (l Limits) burst() int {
	if l.RequestBurst > 0 {
		return l.RequestBurst
	}
	return max(1, int(math.Ceil(l.RequestsPerSecond)))
}

// Bucket is a token bucket as Backend.Take left it.
type Bucket struct {
	Allowed bool    // the unit asked for was taken
	Tokens  float64 // units left in the bucket
}

// Backend keeps the counters of a Limiter. Keys are the Limiter's; a
// backend may prefix them.
type Backend interface {
	// Take takes n units (1 to take, 0 to look, -1 to give one back) from
	// the token bucket key, which holds at most burst units and refills at
	// rate units per second. A bucket never seen is full.
	Take(ctx context.Context, key string, rate float64, burst int, n int) (Bucket, error)
	// Add adds n to the counter key, which expires ttl after its first
	// add, and returns its new value.
	Add(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error)
	// Runs records that this process has local runs of tenant executing
	// or reserved and returns the tenant's runs across every process. With
	// limit > 0 and more than limit runs in all, it records nothing and
	// ok is false.
	Runs(ctx context.Context, tenant string, local, limit int) (total int, ok bool, err error)
	// Lock takes the lock key, waiting until it is free or ctx ends. The
	// lock is held until unlock is called, or at most ttl in a backend
	// shared by processes (one that dies holding it must not hold it
	// forever).
	Lock(ctx context.Context, key string, ttl time.Duration) (unlock func(), err error)
}

// Names of the limits, as problems and /usage name them.
const (
	LimitRequests       = "requests_per_second"
	LimitSessions       = "max_sessions"
	LimitRunsPerMinute  = "runs_per_minute"
	LimitConcurrentRuns = "max_concurrent_runs"
	LimitTokensPerDay   = "tokens_per_day"
)

// exceeded returns the refusal of limit, to be tried again after retry:
// errdefs.CodeRateLimited for a rate (wait Retry-After),
// errdefs.CodeQuotaExceeded for an amount (free some, or wait for the day
// to turn).
func exceeded(code errdefs.Code, limit string, retry time.Duration, format string, args ...any) error {
	secs := max(1, int64(math.Ceil(retry.Seconds())))
	return errdefs.New(errdefs.ErrExhausted, code, format, args...).
		With("limit", limit).With("retry_after", secs)
}

// RetryAfter returns the seconds a refusal of this package asks the
// client to wait, and whether err is one.
func RetryAfter(err error) (int64, bool) {
	e, ok := errors.AsType[*errdefs.Error](err)
	if !ok {
		return 0, false
	}
	secs, ok := e.Extra["retry_after"].(int64)
	return secs, ok
}

// tokensKey is the counter of tenant's model tokens on day (UTC).
func tokensKey(tenant string, day time.Time) string {
	return fmt.Sprintf("tokens:%s:%s", day.Format("2006-01-02"), tenant)
}

// untilTomorrow is how long until the UTC day after now starts.
func untilTomorrow(now time.Time) time.Duration {
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
}
