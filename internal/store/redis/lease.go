package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// A replica runs a session's runs only while it holds the session's lease
// (DESIGN.md §8): a key set with NX and a TTL, holding the lease's fencing
// token and its holder. Appends carry the token, and the append scripts
// check it against the live lease before writing, so a replica that lost
// its lease (paused past the TTL, partitioned, taken over) can never append
// again.

// AcquireLease claims session sessionID for holder until ttl passes. It
// returns the lease's fencing token, strictly greater than any token given
// before for that session. Another live lease, whoever holds it, is
// session.ErrLeaseHeld; a missing session is not found.
func (s *Store) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (int64, error) {
	ms, err := leaseMillis(ttl)
	if err != nil {
		return 0, err
	}
	k := s.keysOf(sessionID)
	token, err := scriptLeaseAcquire.Run(ctx, s.rdb, []string{k.s, k.lease}, holder, ms).Int64()
	switch {
	case isReply(err, replyNoSession):
		return 0, session.SessionNotFound(sessionID)
	case isReply(err, replyHeld):
		return 0, fmt.Errorf("acquire lease of session %s: held by %q: %w", sessionID, replyDetail(err), session.ErrLeaseHeld)
	case err != nil:
		return 0, fmt.Errorf("acquire lease of session %s: %w", sessionID, err)
	}
	return token, nil
}

// RenewLease extends the lease held with token to ttl from now. If the
// lease is not held with token (it expired, was released or was taken by
// another), the error wraps session.ErrFenced; a missing session is not
// found.
func (s *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) error {
	ms, err := leaseMillis(ttl)
	if err != nil {
		return err
	}
	k := s.keysOf(sessionID)
	err = scriptLeaseRenew.Run(ctx, s.rdb, []string{k.s, k.lease}, strconv.FormatInt(token, 10), ms).Err()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(sessionID)
	case isReply(err, replyFenced):
		return fmt.Errorf("renew lease of session %s: %w", sessionID, session.ErrFenced)
	case err != nil:
		return fmt.Errorf("renew lease of session %s: %w", sessionID, err)
	}
	return nil
}

// ReleaseLease ends the lease if it is still held with token; otherwise it
// does nothing. A replica that stops gracefully releases its leases, so
// another can take its sessions over at once instead of after the TTL.
func (s *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	err := scriptLeaseRelease.Run(ctx, s.rdb, []string{s.keysOf(sessionID).lease}, strconv.FormatInt(token, 10)).Err()
	if err != nil {
		return fmt.Errorf("release lease of session %s: %w", sessionID, err)
	}
	return nil
}

// leaseMillis returns ttl in whole milliseconds, the TTL's unit in Redis.
func leaseMillis(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidLeaseTTL, "lease ttl %v is under a millisecond", ttl)
	}
	return ttl.Milliseconds(), nil
}
