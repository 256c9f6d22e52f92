package sqlite

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// leaseTable grants the sessions' leases. The database directory is one
// process's (see lockDir), so leases live in memory: after a restart none
// is held, which is exactly what recovery needs.
type leaseTable struct {
	now    func() time.Time
	mu     sync.Mutex
	held   map[string]lease // by session id
	tokens atomic.Int64     // the last token given, for any session
}

// lease is one session's lease.
type lease struct {
	token   int64
	expires time.Time
}

func (t *leaseTable) init(now func() time.Time) {
	t.now = now
	t.held = make(map[string]lease)
	// Tokens grow across restarts too: start from the clock.
	t.tokens.Store(now().UnixMicro())
}

// AcquireLease claims session sessionID until ttl passes; see
// kernel.LeaseStore.
//
// It takes the lease first and looks the session up after, giving the
// lease back if the session is missing. DeleteSession drops the lease
// again once its delete has committed, so whichever way the two race, no
// lease outlives its session: a lookup before the commit is followed by
// that drop, one after it finds no session.
func (s *Store) AcquireLease(ctx context.Context, sessionID, _ string, ttl time.Duration) (int64, error) {
	token, err := s.leases.acquire(sessionID, ttl)
	if err != nil {
		return 0, err
	}
	if err := s.requireSession(ctx, sessionID); err != nil {
		s.leases.release(sessionID, token)
		return 0, err
	}
	return token, nil
}

// acquire gives session sessionID a lease unless a live one holds it.
func (t *leaseTable) acquire(sessionID string, ttl time.Duration) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if l, ok := t.held[sessionID]; ok && now.Before(l.expires) {
		return 0, session.ErrLeaseHeld
	}
	token := t.tokens.Add(1)
	t.held[sessionID] = lease{token: token, expires: now.Add(ttl)}
	return token, nil
}

// RenewLease extends the lease held with token to ttl from now. A lease
// not held with token is fenced, unless its session is missing: that is
// not found, as every store answers.
func (s *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) error {
	err := s.leases.renew(sessionID, token, ttl)
	if err != nil {
		if missing := s.requireSession(ctx, sessionID); errors.Is(missing, errdefs.ErrNotFound) {
			return missing
		}
	}
	return err
}

// renew extends the lease held with token to ttl from now.
func (t *leaseTable) renew(sessionID string, token int64, ttl time.Duration) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.fencedLocked(sessionID, token); err != nil {
		return err
	}
	t.held[sessionID] = lease{token: token, expires: t.now().Add(ttl)}
	return nil
}

// ReleaseLease ends the lease if it is still held with token.
func (s *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	s.leases.release(sessionID, token)
	return nil
}

// release ends session sessionID's lease if it is held with token.
func (t *leaseTable) release(sessionID string, token int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.held[sessionID]; ok && l.token == token {
		delete(t.held, sessionID)
	}
}

// fenced returns session.ErrFenced unless session sessionID's lease is
// live and held with token. The writer checks it in the transaction of
// the write it guards.
func (t *leaseTable) fenced(sessionID string, token int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fencedLocked(sessionID, token)
}

func (t *leaseTable) fencedLocked(sessionID string, token int64) error {
	l, ok := t.held[sessionID]
	if !ok || l.token != token || !t.now().Before(l.expires) {
		return session.ErrFenced
	}
	return nil
}

// forget drops a deleted session's lease.
func (t *leaseTable) forget(sessionID string) {
	t.mu.Lock()
	delete(t.held, sessionID)
	t.mu.Unlock()
}
