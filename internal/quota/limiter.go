package quota

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Limiter applies Limits to every tenant, with counters kept by a Backend.
// Its methods are safe for concurrent use. A nil *Limiter limits nothing.
type Limiter struct {
	limits  Limits
	backend Backend
	now     func() time.Time

	runs     *localRuns // this process's runs per tenant
	sessions stripes    // serialise each tenant's session admissions here
}

// Options configure New.
type Options struct {
	Limits  Limits
	Backend Backend          // nil keeps the counters in this process
	Now     func() time.Time // the clock of the token days; default time.Now
	// PublishEvery is how often this process's run counts are written to
	// the backend again while it has runs, so a shared backend can drop
	// the counts of a process that stopped; default 5 s.
	PublishEvery time.Duration
}

// New returns a limiter. Close stops its publishing goroutine.
func New(opts Options) *Limiter {
	if opts.Backend == nil {
		opts.Backend = NewMemory()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PublishEvery <= 0 {
		opts.PublishEvery = 5 * time.Second
	}
	l := &Limiter{limits: opts.Limits, backend: opts.Backend, now: opts.Now, sessions: newStripes()}
	l.runs = newLocalRuns(opts.Backend, opts.PublishEvery)
	return l
}

// Close stops publishing run counts.
func (l *Limiter) Close() {
	if l != nil {
		l.runs.close()
	}
}

// Limits returns the limits it applies.
func (l *Limiter) Limits() Limits {
	if l == nil {
		return Limits{}
	}
	return l.limits
}

// RequestPolicy is a tenant's request bucket after a request: what the
// RateLimit-Policy and RateLimit headers advertise.
type RequestPolicy struct {
	Quota     int           // the bucket's size (burst)
	Window    time.Duration // how long an empty bucket takes to refill
	Remaining int           // whole units left
	Reset     time.Duration // until the bucket is full again, or, when refused, until a unit is back
}

// AllowRequest takes one unit of tenant's request bucket. ok is false when
// no rate is set. A refusal is an error (429 rate_limited) with the
// policy as it stands.
func (l *Limiter) AllowRequest(ctx context.Context, tenant string) (RequestPolicy, bool, error) {
	if l == nil || l.limits.RequestsPerSecond <= 0 {
		return RequestPolicy{}, false, nil
	}
	rate, burst := l.limits.RequestsPerSecond, l.limits.burst()
	b, err := l.backend.Take(ctx, "req:"+tenant, rate, burst, 1)
	if err != nil {
		return RequestPolicy{}, false, fmt.Errorf("take a request unit: %w", err)
	}
	p := RequestPolicy{
		Quota: burst, Window: seconds(float64(burst) / rate),
		Remaining: int(math.Floor(b.Tokens)), Reset: seconds((float64(burst) - b.Tokens) / rate),
	}
	if !b.Allowed {
		p.Reset = seconds((1 - b.Tokens) / rate)
		return p, true, exceeded(errdefs.CodeRateLimited, LimitRequests, p.Reset,
			"this tenant sent more than %g requests/s (bursts of %d); retry after %s", rate, burst, p.Reset)
	}
	return p, true, nil
}

// seconds converts a number of seconds to a Duration, rounded up to the
// millisecond.
func seconds(s float64) time.Duration {
	return time.Duration(math.Ceil(max(0, s)*1000)) * time.Millisecond
}

// retryRunsAfter is the Retry-After of a refusal for concurrent runs:
// runs end when they end, which cannot be predicted.
const retryRunsAfter = 5 * time.Second

// takeRun takes a run from tenant's runs per minute; refund gives it back.
func (l *Limiter) takeRun(ctx context.Context, tenant string) (refund func(), err error) {
	perMin := l.limits.RunsPerMinute
	if perMin <= 0 {
		return func() {}, nil
	}
	key, rate := "runs:"+tenant, float64(perMin)/60
	b, err := l.backend.Take(ctx, key, rate, perMin, 1)
	if err != nil {
		return nil, fmt.Errorf("take a run: %w", err)
	}
	if !b.Allowed {
		retry := seconds((1 - b.Tokens) / rate)
		return nil, exceeded(errdefs.CodeRateLimited, LimitRunsPerMinute, retry,
			"this tenant started %d runs in the last minute, the most it may; retry after %s", perMin, retry)
	}
	return func() {
		// Best effort: a unit not given back refills within the minute.
		_, _ = l.backend.Take(context.WithoutCancel(ctx), key, rate, perMin, -1)
	}, nil
}

// RunStarted and RunEnded bracket a run of tenant executing in this
// process; they never block.
func (l *Limiter) RunStarted(tenant string) {
	if l != nil {
		l.runs.add(tenant, 1)
	}
}

// RunEnded is RunStarted's end.
func (l *Limiter) RunEnded(tenant string) {
	if l != nil {
		l.runs.add(tenant, -1)
	}
}
