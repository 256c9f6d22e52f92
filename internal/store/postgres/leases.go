package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/session"
)

// acquireLeaseSQL takes a session's lease unless a live one holds it: a
// new row, or the row of an expired or released lease taken over. It
// returns no row when the session is missing or the lease is held.
const acquireLeaseSQL = `INSERT INTO leases (session_id, token, holder, expires_at)
	SELECT id, nextval('lease_tokens'), $2, kerneld_now_us() + $3 FROM sessions WHERE id = $1
	ON CONFLICT (session_id) DO UPDATE
		SET token = excluded.token, holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.expires_at <= kerneld_now_us()
	RETURNING token`

// AcquireLease claims session sessionID for holder until ttl passes, by
// the database's clock; see kernel.LeaseStore.
func (s *Store) AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (int64, error) {
	var token int64
	err := s.pool.QueryRow(ctx, acquireLeaseSQL, sessionID, holder, ttl.Microseconds()).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, s.missing(ctx, sessionID, session.ErrLeaseHeld)
	}
	if err != nil {
		return 0, fmt.Errorf("acquire lease of session %s: %w", sessionID, unavailable(ctx, err))
	}
	return token, nil
}

// RenewLease extends the lease held with token to ttl from now. A lease
// not held with token is fenced, unless its session is missing.
func (s *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE leases SET expires_at = kerneld_now_us() + $3
		WHERE session_id = $1 AND token = $2 AND expires_at > kerneld_now_us()`, sessionID, token, ttl.Microseconds())
	if err != nil {
		return fmt.Errorf("renew lease of session %s: %w", sessionID, unavailable(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return s.missing(ctx, sessionID, session.ErrFenced)
	}
	return nil
}

// ReleaseLease ends the lease if it is still held with token.
func (s *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE session_id = $1 AND token = $2`, sessionID, token)
	if err != nil {
		return fmt.Errorf("release lease of session %s: %w", sessionID, unavailable(ctx, err))
	}
	return nil
}

// checkLease returns session.ErrFenced unless session id's lease is live
// and held with token. It locks the lease's row for the rest of tx, so a
// take-over waits for the write it guards and then fences the next.
func checkLease(ctx context.Context, tx pgx.Tx, id string, token int64) error {
	var held int64
	err := tx.QueryRow(ctx, `SELECT token FROM leases WHERE session_id = $1 AND expires_at > kerneld_now_us()
		FOR UPDATE`, id).Scan(&held)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return session.ErrFenced
	case err != nil:
		return err
	case held != token:
		return session.ErrFenced
	}
	return nil
}
