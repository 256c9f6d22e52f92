package quota

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Admission. The kernel asks the Limiter before every session and run it
// creates, whatever asked for it (internal/kernel/admit.go lists the
// paths), so no route or tool can go around a quota:
//
//   - AdmitSession for a session about to be stored: max_sessions,
//     atomically, by holding the tenant's session lock from the count
//     until the session is stored;
//   - AdmitRun for a run about to be posted: tokens_per_day and
//     runs_per_minute;
//   - AdmitStart for a run about to start executing, at once or from a
//     queue: a max_concurrent_runs slot, reserved before it is checked, so
//     that the last slot goes to one run only. A run posted to a busy
//     session waits in its queue without one.

// sessionLockTTL bounds how long a session admission holds its tenant's
// lock in a shared backend. A count and an insert take milliseconds; a
// replica that dies holding the lock delays the tenant's next creation by
// at most this.
const sessionLockTTL = 5 * time.Second

// AdmitSession admits a new session of tenant, which stores stored(ctx)
// sessions now. From the count until done is called, which the caller
// does once the session is stored or failed to be, it holds the tenant's
// session lock, in this process and, with a shared backend, across every
// replica: two creations racing for the last place cannot both have it.
// With no session limit it counts nothing and locks nothing.
func (l *Limiter) AdmitSession(ctx context.Context, tenant string, stored func(context.Context) (int, error)) (done func(), err error) {
	if l == nil || l.limits.MaxSessions <= 0 {
		return func() {}, nil
	}
	unlock, err := l.lockSessions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	n, err := stored(ctx)
	if err != nil {
		unlock()
		return nil, err
	}
	if n >= l.limits.MaxSessions {
		unlock()
		return nil, exceeded(errdefs.CodeQuotaExceeded, LimitSessions, time.Minute,
			"this tenant stores %d sessions, the most it may; delete some first", n)
	}
	return unlock, nil
}

// lockSessions takes tenant's session lock here, then in the backend.
func (l *Limiter) lockSessions(ctx context.Context, tenant string) (unlock func(), err error) {
	unlockHere, err := l.sessions.lock(ctx, tenant)
	if err != nil {
		return nil, err
	}
	unlockShared, err := l.backend.Lock(ctx, "sessions:"+tenant, sessionLockTTL)
	if err != nil {
		unlockHere()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errdefs.Storage("the quota counters cannot be reached", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unlockShared()
			unlockHere()
		})
	}, nil
}

// AdmitRun admits a run of tenant about to be posted: its token budget is
// not spent and a run per minute is left. done(false), for a run not
// created after all (refused for another reason, or a replay), gives the
// run per minute back.
func (l *Limiter) AdmitRun(ctx context.Context, tenant string) (done func(created bool), err error) {
	if l == nil {
		return func(bool) {}, nil
	}
	if err := l.checkTokens(ctx, tenant); err != nil {
		return nil, err
	}
	refund, err := l.takeRun(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func(created bool) {
		once.Do(func() {
			if !created {
				refund()
			}
		})
	}, nil
}

// AdmitStart admits a run of tenant about to start executing: a
// concurrent run is free. done(true) passes the slot to the run (RunEnded
// frees it); done(false) gives it back.
func (l *Limiter) AdmitStart(ctx context.Context, tenant string) (done func(executing bool), err error) {
	if l == nil {
		return func(bool) {}, nil
	}
	release, err := l.runs.reserve(ctx, tenant, l.limits.MaxConcurrentRuns)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func(executing bool) {
		once.Do(func() {
			if !executing {
				release()
			}
		})
	}, nil
}

// stripes are in-process locks, one per tenant hash: a tenant's
// admissions in this process queue here rather than poll a shared lock.
type stripes struct {
	seed  maphash.Seed
	locks [64]chan struct{}
}

func newStripes() stripes {
	s := stripes{seed: maphash.MakeSeed()}
	for i := range s.locks {
		s.locks[i] = make(chan struct{}, 1)
	}
	return s
}

// lock takes key's stripe, or fails when ctx ends first.
func (s *stripes) lock(ctx context.Context, key string) (unlock func(), err error) {
	c := s.locks[maphash.String(s.seed, key)%uint64(len(s.locks))]
	select {
	case c <- struct{}{}:
		return func() { <-c }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the tenant's admissions: %w", ctx.Err())
	}
}
