package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// The sessions' schedules (schedule.Store), in the table of migration
// 0003. Deleting a session deletes its schedules with it. A claim skips
// the rows another replica's claim is locking, so two replicas claiming
// together never take one schedule, and the claim counter is the fencing
// token FinishFiring presents.

var _ schedule.Store = (*Store)(nil)

// scheduleColumns is the column list scanSchedule reads, in its order.
const scheduleColumns = `session_id, id, tenant, at, every, input, if_busy, next_at, created_at, fired, last, claim`

// scheduleTenantLock names the advisory lock that makes a tenant's
// creations take turns, so two in different sessions cannot both take
// the tenant's last place.
const scheduleTenantLock = "kerneld schedules "

// CreateSchedule stores sch; see schedule.Store.
func (s *Store) CreateSchedule(ctx context.Context, sch schedule.Schedule, b schedule.Bounds) error {
	last, err := encodeFiring(sch.Last)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockSession(ctx, tx, sch.SessionID); err != nil {
			return wrapUnlessKnown(err, "create schedule %s", sch.ID)
		}
		if b.PerTenant > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, scheduleTenantLock+sch.Tenant); err != nil {
				return fmt.Errorf("create schedule %s: %w", sch.ID, err)
			}
		}
		if err := checkScheduleRoom(ctx, tx, sch, b); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schedules (`+scheduleColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0)`, sch.SessionID, sch.ID, sch.Tenant, nullMicros(sch.At),
			int64(sch.Every), sch.Input, sch.IfBusy, micros(sch.NextAt), micros(sch.CreatedAt), sch.Fired, last)
		if err != nil {
			return fmt.Errorf("create schedule %s: %w", sch.ID, err)
		}
		return nil
	})
}

// checkScheduleRoom fails when sch's id is taken or its session or tenant
// has b's schedules already.
func checkScheduleRoom(ctx context.Context, tx pgx.Tx, sch schedule.Schedule, b schedule.Bounds) error {
	var taken, perSession, perTenant int
	err := tx.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM schedules WHERE session_id = $1 AND id = $2),
		(SELECT count(*) FROM schedules WHERE session_id = $1),
		(SELECT count(*) FROM schedules WHERE tenant = $3)`,
		sch.SessionID, sch.ID, sch.Tenant).Scan(&taken, &perSession, &perTenant)
	switch {
	case err != nil:
		return fmt.Errorf("create schedule %s: count schedules: %w", sch.ID, err)
	case taken > 0:
		return schedule.Exists(sch.ID)
	case b.PerSession > 0 && perSession >= b.PerSession:
		return schedule.LimitReached("session "+session.PublicID(sch.SessionID), b.PerSession)
	case b.PerTenant > 0 && perTenant >= b.PerTenant:
		return schedule.LimitReached("tenant "+sch.Tenant, b.PerTenant)
	}
	return nil
}

// GetSchedule returns schedule id of session sessionID.
func (s *Store) GetSchedule(ctx context.Context, sessionID, id string) (schedule.Schedule, error) {
	sch, err := scanSchedule(s.pool.QueryRow(ctx,
		`SELECT `+scheduleColumns+` FROM schedules WHERE session_id = $1 AND id = $2`, sessionID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return schedule.Schedule{}, schedule.NotFound(id)
	}
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("get schedule %s: %w", id, unavailable(ctx, err))
	}
	return sch, nil
}

// ListSchedules returns a session's schedules, oldest first.
func (s *Store) ListSchedules(ctx context.Context, sessionID string) ([]schedule.Schedule, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT `+scheduleColumns+` FROM schedules WHERE session_id = $1 ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list schedules of session %s: %w", sessionID, unavailable(ctx, err))
	}
	out, err := scanSchedules(rows)
	if err != nil {
		return nil, fmt.Errorf("list schedules of session %s: %w", sessionID, unavailable(ctx, err))
	}
	return out, nil
}

// DeleteSchedule deletes schedule id of session sessionID.
func (s *Store) DeleteSchedule(ctx context.Context, sessionID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM schedules WHERE session_id = $1 AND id = $2`, sessionID, id)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, unavailable(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return schedule.NotFound(id)
	}
	return nil
}

// DeleteSessionSchedules deletes every schedule of session sessionID;
// deleting the session has done so already.
func (s *Store) DeleteSessionSchedules(ctx context.Context, sessionID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM schedules WHERE session_id = $1`, sessionID); err != nil {
		return fmt.Errorf("delete schedules of session %s: %w", sessionID, unavailable(ctx, err))
	}
	return nil
}

// ClaimDue claims the schedules due at now for holder; see schedule.Store.
func (s *Store) ClaimDue(ctx context.Context, holder string, now time.Time, ttl time.Duration, limit int) ([]schedule.Schedule, error) {
	var out []schedule.Schedule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE schedules
			SET claimed_by = $1, claim_until = $2, claim = claim + 1
			WHERE (session_id, id) IN (SELECT session_id, id FROM schedules WHERE next_at <= $3 AND claim_until <= $3
				ORDER BY next_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
			RETURNING `+scheduleColumns, holder, micros(now.Add(ttl)), micros(now), limit)
		if err != nil {
			return fmt.Errorf("claim due schedules: %w", err)
		}
		out, err = scanSchedules(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	schedule.SortDue(out) // RETURNING gives no order
	return out, nil
}

// FinishFiring records the firing of sch; see schedule.Store.
func (s *Store) FinishFiring(ctx context.Context, sch schedule.Schedule, done bool) error {
	last, err := encodeFiring(sch.Last)
	if err != nil {
		return err
	}
	var n int64
	if done {
		tag, err := s.pool.Exec(ctx, `DELETE FROM schedules WHERE session_id = $1 AND id = $2 AND claim = $3`,
			sch.SessionID, sch.ID, sch.Claim)
		if err != nil {
			return fmt.Errorf("record firing of schedule %s: %w", sch.ID, unavailable(ctx, err))
		}
		n = tag.RowsAffected()
	} else {
		tag, err := s.pool.Exec(ctx, `UPDATE schedules
			SET next_at = $1, fired = $2, last = $3, claimed_by = '', claim_until = 0
			WHERE session_id = $4 AND id = $5 AND claim = $6`,
			micros(sch.NextAt), sch.Fired, last, sch.SessionID, sch.ID, sch.Claim)
		if err != nil {
			return fmt.Errorf("record firing of schedule %s: %w", sch.ID, unavailable(ctx, err))
		}
		n = tag.RowsAffected()
	}
	if n == 0 {
		return schedule.ErrClaimLost
	}
	return nil
}

// scanSchedules reads rows of scheduleColumns and closes them.
func scanSchedules(rows pgx.Rows) ([]schedule.Schedule, error) {
	defer rows.Close()
	out := []schedule.Schedule{}
	for rows.Next() {
		sch, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sch)
	}
	return out, rows.Err()
}

// scanSchedule reads one row of scheduleColumns.
func scanSchedule(row pgx.Row) (schedule.Schedule, error) {
	var sch schedule.Schedule
	var at *int64
	var every, next, created int64
	var lastText *string
	err := row.Scan(&sch.SessionID, &sch.ID, &sch.Tenant, &at, &every, &sch.Input, &sch.IfBusy, &next, &created,
		&sch.Fired, &lastText, &sch.Claim)
	if err != nil {
		return schedule.Schedule{}, err
	}
	sch.At, sch.Every = fromNullMicros(at), time.Duration(every)
	sch.NextAt, sch.CreatedAt = fromMicros(next), fromMicros(created)
	if lastText != nil {
		sch.Last = &schedule.Firing{}
		if err := json.Unmarshal([]byte(*lastText), sch.Last); err != nil {
			return schedule.Schedule{}, fmt.Errorf("decode firing: %w", err)
		}
	}
	return sch, nil
}

// encodeFiring returns a firing as JSON text, or nil (NULL) for none.
func encodeFiring(f *schedule.Firing) (*string, error) {
	if f == nil {
		return nil, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode firing: %w", err)
	}
	text := string(b)
	return &text, nil
}
