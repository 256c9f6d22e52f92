package memory

import (
	"context"
	"errors"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// AcquireLease claims session sessionID for holder until ttl passes; see
// kernel.LeaseStore. Tokens come from one counter for the whole store, so
// a session's tokens grow even across a delete and re-create.
func (s *Store) AcquireLease(ctx context.Context, sessionID, _ string, ttl time.Duration) (int64, error) {
	var token int64
	err := s.write(sessionID, func(rec *record) error {
		now := s.now()
		if rec.lease.live(now) {
			return session.ErrLeaseHeld
		}
		token = s.tokens.Add(1)
		rec.lease = lease{token: token, expires: now.Add(ttl)} // one process: the holder is this one
		return nil
	})
	return token, err
}

// RenewLease extends the lease held with token to ttl from now.
func (s *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) error {
	return s.write(sessionID, func(rec *record) error {
		now := s.now()
		if err := rec.fenced(token, now); err != nil {
			return err
		}
		rec.lease.expires = now.Add(ttl)
		return nil
	})
}

// ReleaseLease ends the lease if it is still held with token.
func (s *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	err := s.write(sessionID, func(rec *record) error {
		if rec.lease.token == token {
			rec.lease.expires = time.Time{}
		}
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // deleted: nothing is held
	}
	return err
}

// fenced returns session.ErrFenced unless the lease is live and held with
// token. The record's lock is held.
func (rec *record) fenced(token int64, now time.Time) error {
	if rec.lease.token != token || !rec.lease.live(now) {
		return session.ErrFenced
	}
	return nil
}

// live reports whether the lease is held at now.
func (l lease) live(now time.Time) bool { return l.token != 0 && now.Before(l.expires) }
