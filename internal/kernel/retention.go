package kernel

import (
	"context"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Retention says when idle sessions are closed and closed ones deleted.
type Retention struct {
	// TTL is the default idle time after which a session is closed; 0
	// means sessions live until deleted unless created with their own TTL.
	TTL time.Duration
	// DeleteAfter is how long a session closed by retention stays
	// readable before it is deleted; default 24h.
	DeleteAfter time.Duration
	// Interval is how often the sweeper runs; default 1m.
	Interval time.Duration
	// Batch bounds the sessions one sweep closes or deletes; default 100.
	Batch int
}

func (r Retention) withDefaults() Retention {
	if r.DeleteAfter <= 0 {
		r.DeleteAfter = 24 * time.Hour
	}
	if r.Interval <= 0 {
		r.Interval = time.Minute
	}
	if r.Batch <= 0 {
		r.Batch = 100
	}
	return r
}

// expiry returns when a session idle from now with ttl expires; zero when
// it never does.
func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

// sweepLoop runs a retention sweep every interval until the kernel closes.
func (k *Kernel) sweepLoop() {
	t := time.NewTicker(k.retention.Interval)
	defer t.Stop()
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
		if err := k.Sweep(k.ctx); err != nil && k.ctx.Err() == nil {
			k.log.Error("retention sweep", "err", err)
		}
	}
}

// Sweep closes sessions idle past their TTL and deletes, with their
// subtrees, sessions closed by retention more than DeleteAfter ago. Each
// step handles at most Batch sessions, so one sweep stays short however
// many have piled up; the rest wait for the next.
func (k *Kernel) Sweep(ctx context.Context) error {
	now := k.now().UTC()
	expired, err := k.store.ListSessions(ctx, SessionQuery{ExpiresBefore: now, Limit: k.retention.Batch})
	if err != nil {
		return err
	}
	for _, s := range expired {
		closed, err := k.expire(ctx, s.ID)
		if err != nil {
			return err
		}
		k.notifyEnded(closed)
		k.log.Info("session expired", "session", s.ID)
	}
	stale, err := k.store.ListSessions(ctx, SessionQuery{
		State: session.StateClosed, UpdatedBefore: now.Add(-k.retention.DeleteAfter), Limit: k.retention.Batch,
	})
	if err != nil {
		return err
	}
	for _, s := range stale {
		if err := k.deleteSession(ctx, s.ID, true); err != nil {
			return err
		}
		k.log.Info("session deleted by retention", "session", s.ID)
	}
	return nil
}

// expire closes session id for retention. Its expiry is cleared so the
// next sweep does not find it again; its UpdatedAt starts DeleteAfter.
func (k *Kernel) expire(ctx context.Context, id string) (session.Session, error) {
	err := k.updateSession(ctx, id, func(s *session.Session) error {
		s.ExpiresAt = time.Time{}
		return closeState(s, k.now().UTC())
	})
	if err != nil {
		return session.Session{}, err
	}
	return k.closeSession(ctx, id)
}
