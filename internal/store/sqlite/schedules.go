package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// The sessions' schedules (schedule.Store), in the table of migration
// 0009. Deleting a session deletes its schedules with it. The writer is
// the only one to write, so a claim is one UPDATE … RETURNING, and no two
// holders can take one schedule.

// scheduleColumns is the column list scanSchedule reads, in its order.
const scheduleColumns = `session_id, id, tenant, at, every, input, if_busy, next_at, created_at, fired, last, claim`

// CreateSchedule stores sch; see schedule.Store.
func (s *Store) CreateSchedule(ctx context.Context, sch schedule.Schedule, b schedule.Bounds) error {
	last, err := encodeFiring(sch.Last)
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		if own, err := tx.requireSession(sch.SessionID); own != nil || err != nil {
			return own, err
		}
		if own, err := tx.checkScheduleRoom(sch, b); own != nil || err != nil {
			return own, err
		}
		_, err = tx.conn.ExecContext(tx.ctx, `INSERT INTO schedules (`+scheduleColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`, sch.SessionID, sch.ID, sch.Tenant, nullMicros(sch.At),
			int64(sch.Every), sch.Input, sch.IfBusy, micros(sch.NextAt), micros(sch.CreatedAt), sch.Fired, last)
		if err != nil {
			return nil, fmt.Errorf("create schedule %s: %w", sch.ID, err)
		}
		return nil, nil
	})
}

// checkScheduleRoom fails, as the call's own failure, when sch's id is
// taken or its session or tenant has b's schedules already.
func (tx *batchTx) checkScheduleRoom(sch schedule.Schedule, b schedule.Bounds) (own, err error) {
	var taken, perSession, perTenant int
	err = tx.conn.QueryRowContext(tx.ctx, `SELECT
		(SELECT count(*) FROM schedules WHERE session_id = ? AND id = ?),
		(SELECT count(*) FROM schedules WHERE session_id = ?),
		(SELECT count(*) FROM schedules WHERE tenant = ?)`,
		sch.SessionID, sch.ID, sch.SessionID, sch.Tenant).Scan(&taken, &perSession, &perTenant)
	switch {
	case err != nil:
		return nil, fmt.Errorf("create schedule %s: count schedules: %w", sch.ID, err)
	case taken > 0:
		return schedule.Exists(sch.ID), nil
	case b.PerSession > 0 && perSession >= b.PerSession:
		return schedule.LimitReached("session "+session.PublicID(sch.SessionID), b.PerSession), nil
	case b.PerTenant > 0 && perTenant >= b.PerTenant:
		return schedule.LimitReached("tenant "+sch.Tenant, b.PerTenant), nil
	}
	return nil, nil
}

// GetSchedule returns schedule id of session sessionID.
func (s *Store) GetSchedule(ctx context.Context, sessionID, id string) (schedule.Schedule, error) {
	var sch schedule.Schedule
	err := s.readRow(ctx, func(row scanner) (err error) {
		sch, err = scanSchedule(row)
		return err
	}, `SELECT `+scheduleColumns+` FROM schedules WHERE session_id = ? AND id = ?`, sessionID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return schedule.Schedule{}, schedule.NotFound(id)
	}
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return sch, nil
}

// ListSchedules returns a session's schedules, oldest first.
func (s *Store) ListSchedules(ctx context.Context, sessionID string) ([]schedule.Schedule, error) {
	var out []schedule.Schedule
	err := s.readRows(ctx, func(rows *sql.Rows) (err error) {
		out, err = scanSchedules(rows)
		return err
	}, `SELECT `+scheduleColumns+` FROM schedules WHERE session_id = ? ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list schedules of session %s: %w", sessionID, err)
	}
	return out, nil
}

// DeleteSchedule deletes schedule id of session sessionID.
func (s *Store) DeleteSchedule(ctx context.Context, sessionID, id string) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		res, err := tx.conn.ExecContext(tx.ctx, `DELETE FROM schedules WHERE session_id = ? AND id = ?`, sessionID, id)
		if err != nil {
			return nil, fmt.Errorf("delete schedule %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return schedule.NotFound(id), err
		}
		return nil, nil
	})
}

// DeleteSessionSchedules deletes every schedule of session sessionID;
// deleting the session has done so already.
func (s *Store) DeleteSessionSchedules(ctx context.Context, sessionID string) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		if _, err := tx.conn.ExecContext(tx.ctx, `DELETE FROM schedules WHERE session_id = ?`, sessionID); err != nil {
			return nil, fmt.Errorf("delete schedules of session %s: %w", sessionID, err)
		}
		return nil, nil
	})
}

// ClaimDue claims the schedules due at now for holder; see schedule.Store.
func (s *Store) ClaimDue(ctx context.Context, holder string, now time.Time, ttl time.Duration, limit int) ([]schedule.Schedule, error) {
	var out []schedule.Schedule
	err := s.write(ctx, func(tx *batchTx) (own, err error) {
		rows, err := tx.conn.QueryContext(tx.ctx, `UPDATE schedules
			SET claimed_by = ?, claim_until = ?, claim = claim + 1
			WHERE rowid IN (SELECT rowid FROM schedules WHERE next_at <= ? AND claim_until <= ?
				ORDER BY next_at, id LIMIT ?)
			RETURNING `+scheduleColumns, holder, micros(now.Add(ttl)), micros(now), micros(now), limit)
		if err != nil {
			return nil, fmt.Errorf("claim due schedules: %w", err)
		}
		out, err = scanSchedules(rows)
		return nil, err
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
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		var res sql.Result
		if done {
			res, err = tx.conn.ExecContext(tx.ctx, `DELETE FROM schedules WHERE session_id = ? AND id = ? AND claim = ?`,
				sch.SessionID, sch.ID, sch.Claim)
		} else {
			res, err = tx.conn.ExecContext(tx.ctx, `UPDATE schedules
				SET next_at = ?, fired = ?, last = ?, claimed_by = '', claim_until = 0
				WHERE session_id = ? AND id = ? AND claim = ?`,
				micros(sch.NextAt), sch.Fired, last, sch.SessionID, sch.ID, sch.Claim)
		}
		if err != nil {
			return nil, fmt.Errorf("record firing of schedule %s: %w", sch.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return schedule.ErrClaimLost, err
		}
		return nil, nil
	})
}

// scanSchedules reads rows of scheduleColumns and closes them.
func scanSchedules(rows *sql.Rows) ([]schedule.Schedule, error) {
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
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
func scanSchedule(row scanner) (schedule.Schedule, error) {
	var sch schedule.Schedule
	var at sql.NullInt64
	var every, next, created int64
	var last []byte
	err := row.Scan(&sch.SessionID, &sch.ID, &sch.Tenant, &at, &every, &sch.Input, &sch.IfBusy, &next, &created,
		&sch.Fired, &last, &sch.Claim)
	if err != nil {
		return schedule.Schedule{}, err
	}
	sch.At, sch.Every = fromNullMicros(at), time.Duration(every)
	sch.NextAt, sch.CreatedAt = fromMicros(next), fromMicros(created)
	if last != nil {
		sch.Last = &schedule.Firing{}
		if err := json.Unmarshal(last, sch.Last); err != nil {
			return schedule.Schedule{}, fmt.Errorf("decode firing: %w", err)
		}
	}
	return sch, nil
}

// encodeFiring returns a firing as JSON text, or nil (NULL) for none.
func encodeFiring(f *schedule.Firing) (any, error) {
	if f == nil {
		return nil, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode firing: %w", err)
	}
	return string(b), nil
}
