package quota

import (
	"context"
	"math"
)

// Usage is a tenant's use of each limit, beside the limit (0: none).
type Usage struct {
	Tenant            string
	RequestsAvailable int // units left in the request bucket; -1 with no rate
	Sessions          int
	RunsAvailable     int // runs it may start now under runs_per_minute; -1 with no limit
	ConcurrentRuns    int
	TokensToday       int64
	Limits            Limits
}

// Usage returns tenant's usage; stored is how many sessions it stores.
// Looking uses up nothing.
func (l *Limiter) Usage(ctx context.Context, tenant string, stored int) (Usage, error) {
	u := Usage{Tenant: tenant, Sessions: stored, RequestsAvailable: -1, RunsAvailable: -1, Limits: l.Limits()}
	if l == nil {
		return u, nil
	}
	var err error
	if lim := l.limits; lim.RequestsPerSecond > 0 {
		if u.RequestsAvailable, err = l.available(ctx, "req:"+tenant, lim.RequestsPerSecond, lim.burst()); err != nil {
			return u, err
		}
	}
	if perMin := l.limits.RunsPerMinute; perMin > 0 {
		if u.RunsAvailable, err = l.available(ctx, "runs:"+tenant, float64(perMin)/60, perMin); err != nil {
			return u, err
		}
	}
	if u.ConcurrentRuns, err = l.runs.total(ctx, tenant); err != nil {
		return u, err
	}
	u.TokensToday, err = l.TokensSpent(ctx, tenant)
	return u, err
}

// available returns the whole units left in a bucket, taking none.
func (l *Limiter) available(ctx context.Context, key string, rate float64, burst int) (int, error) {
	b, err := l.backend.Take(ctx, key, rate, burst, 0)
	return int(math.Floor(b.Tokens)), err
}
