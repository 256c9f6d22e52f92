package kernel

import (
	"context"
	"errors"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
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

// Sweep closes, with their subtrees, sessions idle past their TTL, and
// deletes, with their subtrees, sessions closed more than DeleteAfter ago.
// A session is idle while it has no run: none executing, waiting for an
// approval or queued, here or on another replica. Each step handles at most Batch sessions, so one
// sweep stays short however many have piled up; the rest wait for the
// next.
func (k *Kernel) Sweep(ctx context.Context) error {
	now := k.now().UTC()
	expired, err := k.store.ListSessions(ctx, SessionQuery{ExpiresBefore: now, Limit: k.retention.Batch})
	if err != nil {
		return err
	}
	for _, s := range expired {
		closed, err := k.expire(ctx, s.ID, now)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return err
		}
		if closed {
			k.log.Info("session expired", "session", s.ID)
		}
	}
	stale, err := k.store.ListSessions(ctx, SessionQuery{
		State: session.StateClosed, UpdatedBefore: now.Add(-k.retention.DeleteAfter), Limit: k.retention.Batch,
	})
	if err != nil {
		return err
	}
	for _, s := range stale {
		err := k.deleteSession(ctx, s.ID, true)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // another replica's sweep got there first
		}
		if err != nil {
			return err
		}
		k.log.Info("session deleted by retention", "session", s.ID)
	}
	return nil
}

// expire closes session id, and its subtree, if at now it is still idle
// past its expiry; closing clears the expiry, and its UpdatedAt starts
// DeleteAfter. A session found busy keeps running: its expiry is cleared,
// so sweeps stop finding it, and is set again when it is free.
func (k *Kernel) expire(ctx context.Context, id string, now time.Time) (closed bool, err error) {
	// Under the session's stripe lock no run can start here meanwhile.
	unlock := k.lockSession(id)
	defer unlock()
	busy, err := k.hasWork(ctx, id)
	if err != nil {
		return false, err
	}
	err = k.updateSession(ctx, id, func(s *session.Session) error {
		switch {
		case s.ActiveRunID != "" || busy:
			s.ExpiresAt = time.Time{}
			return nil
		case s.ExpiresAt.IsZero() || !s.ExpiresAt.Before(now):
			return errUnchanged // used since it was listed
		}
		closed = true
		s.ClosedReason = "idle longer than its ttl"
		return closeState(s, now)
	})
	if err != nil || !closed {
		return false, err
	}
	s, err := k.closeSession(ctx, id, "") // closed above, so it is told here
	if err != nil {
		return true, err
	}
	k.notifyEnded(s)
	return true, nil
}
