package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

var _ webhook.Outbox = (*Store)(nil)

// deliveryColumns is the column list scanDelivery reads, in its order.
const deliveryColumns = `id, tenant, session_id, type, url, key_id, body, state, attempts, created_at,
	scheduled_at, next_at, last_attempt_at, last_status, last_error, claim`

// The outbox's statements. They run unprepared: deliveries are written a
// few per run, not per token, so preparing them on the writer's
// connection would buy nothing measurable.
const (
	addDeliverySQL = `INSERT INTO webhook_deliveries (id, tenant, session_id, type, url, key_id, body, state,
		attempts, created_at, scheduled_at, next_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`
	claimDeliveriesSQL = `UPDATE webhook_deliveries SET claim = ?, claim_until = ?
		WHERE id IN (SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_at <= ? AND claim_until <= ?
			ORDER BY next_at, id LIMIT ?)
		RETURNING ` + deliveryColumns
	finishAttemptSQL = `UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at = ?, last_attempt_at = ?,
		last_status = ?, last_error = ?, claim = '', claim_until = 0 WHERE id = ? AND claim = ? AND claim <> ''`
	redeliverSQL = `UPDATE webhook_deliveries SET state = 'pending', attempts = 0, scheduled_at = ?, next_at = ?,
		claim = '', claim_until = 0 WHERE id = ? AND tenant = ? AND state <> 'pending'
		RETURNING ` + deliveryColumns
	pruneDeliveriesSQL = `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND last_attempt_at < ?`
)

// AddDeliveries implements webhook.Outbox.
func (s *Store) AddDeliveries(ctx context.Context, ds ...webhook.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		return nil, tx.addDeliveries(ds)
	})
}

// addDeliveries inserts ds in the writer's transaction, so that a write
// can add the deliveries that announce it in the same commit.
func (tx *batchTx) addDeliveries(ds []webhook.Delivery) error {
	for _, d := range ds {
		if _, err := tx.conn.ExecContext(tx.ctx, addDeliverySQL, d.ID, d.Tenant, d.SessionID, d.Type, d.URL, d.KeyID,
			d.Body, micros(d.CreatedAt), micros(d.ScheduledAt), micros(d.NextAt)); err != nil {
			return fmt.Errorf("add webhook delivery %s: %w", d.ID, err)
		}
	}
	return nil
}

// ClaimDeliveries implements webhook.Outbox. The writer is the only
// writer, so selecting and claiming in one statement is atomic.
func (s *Store) ClaimDeliveries(ctx context.Context, claim string, now time.Time, ttl time.Duration, limit int) ([]webhook.Delivery, error) {
	var out []webhook.Delivery
	err := s.write(ctx, func(tx *batchTx) (own, err error) {
		rows, err := tx.conn.QueryContext(tx.ctx, claimDeliveriesSQL, claim, micros(now.Add(ttl)), micros(now), micros(now), limit)
		if err != nil {
			return nil, fmt.Errorf("claim webhook deliveries: %w", err)
		}
		out, err = scanDeliveries(rows)
		return nil, err
	})
	slices.SortFunc(out, func(a, b webhook.Delivery) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), cmp.Compare(a.ID, b.ID))
	})
	return out, err
}

// FinishAttempt implements webhook.Outbox.
func (s *Store) FinishAttempt(ctx context.Context, d webhook.Delivery) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		res, err := tx.conn.ExecContext(tx.ctx, finishAttemptSQL, string(d.State), d.Attempts, micros(d.NextAt),
			nullMicros(d.LastAttemptAt), d.LastStatus, d.LastError, d.ID, d.Claim)
		if err != nil {
			return nil, fmt.Errorf("record webhook delivery %s: %w", d.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return webhook.ErrClaimLost, err
		}
		return nil, nil
	})
}

// GetDelivery implements webhook.Outbox.
func (s *Store) GetDelivery(ctx context.Context, tenant, id string) (webhook.Delivery, error) {
	rd, err := s.acquire(ctx)
	if err != nil {
		return webhook.Delivery{}, fmt.Errorf("get webhook delivery %s: %w", id, err)
	}
	defer s.release(rd)
	rows, err := rd.query(brief(ctx), `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ? AND tenant = ?`, id, tenant)
	if err != nil {
		return webhook.Delivery{}, fmt.Errorf("get webhook delivery %s: %w", id, err)
	}
	ds, err := scanDeliveries(rows)
	if err != nil {
		return webhook.Delivery{}, err
	}
	if len(ds) == 0 {
		return webhook.Delivery{}, webhook.DeliveryNotFound(id)
	}
	ds[0].Claim = ""
	return ds[0], nil
}

// ListDeliveries implements webhook.Outbox.
func (s *Store) ListDeliveries(ctx context.Context, q webhook.Query) ([]webhook.Delivery, error) {
	where, args := []string{"tenant = ?"}, []any{q.Tenant}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if q.After != nil {
		where = append(where, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, micros(q.After.CreatedAt), micros(q.After.CreatedAt), q.After.ID)
	}
	query := `SELECT ` + deliveryColumns + ` FROM webhook_deliveries WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, id DESC` + limitClause(q.Limit)
	rd, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	defer s.release(rd)
	rows, err := rd.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	ds, err := scanDeliveries(rows)
	for i := range ds {
		ds[i].Claim = ""
	}
	return ds, err
}

// RedeliverDelivery implements webhook.Outbox.
func (s *Store) RedeliverDelivery(ctx context.Context, tenant, id string, now time.Time) (webhook.Delivery, error) {
	var out webhook.Delivery
	err := s.write(ctx, func(tx *batchTx) (own, err error) {
		rows, err := tx.conn.QueryContext(tx.ctx, redeliverSQL, micros(now), micros(now), id, tenant)
		if err != nil {
			return nil, fmt.Errorf("redeliver webhook delivery %s: %w", id, err)
		}
		ds, err := scanDeliveries(rows)
		if err != nil || len(ds) == 1 {
			out = first(ds)
			return nil, err
		}
		var state string
		switch err := tx.conn.QueryRowContext(tx.ctx, `SELECT state FROM webhook_deliveries WHERE id = ? AND tenant = ?`,
			id, tenant).Scan(&state); {
		case errors.Is(err, sql.ErrNoRows):
			return webhook.DeliveryNotFound(id), nil
		case err != nil:
			return nil, fmt.Errorf("redeliver webhook delivery %s: %w", id, err)
		}
		return webhook.DeliveryPending(id), nil
	})
	return out, err
}

func first(ds []webhook.Delivery) webhook.Delivery {
	if len(ds) == 0 {
		return webhook.Delivery{}
	}
	return ds[0]
}

// PruneDeliveries implements webhook.Outbox.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *batchTx) (own, err error) {
		res, err := tx.conn.ExecContext(tx.ctx, pruneDeliveriesSQL, micros(before))
		if err != nil {
			return nil, fmt.Errorf("prune webhook deliveries: %w", err)
		}
		n, err = res.RowsAffected()
		return nil, err
	})
	return int(n), err
}

// scanDeliveries reads rows of deliveryColumns and closes them.
func scanDeliveries(rows *sql.Rows) ([]webhook.Delivery, error) {
	defer func() { _ = rows.Close() }() // rows.Err reports what went wrong
	var out []webhook.Delivery
	for rows.Next() {
		var d webhook.Delivery
		var state string
		var created, scheduled, next int64
		var last sql.NullInt64
		if err := rows.Scan(&d.ID, &d.Tenant, &d.SessionID, &d.Type, &d.URL, &d.KeyID, &d.Body, &state, &d.Attempts,
			&created, &scheduled, &next, &last, &d.LastStatus, &d.LastError, &d.Claim); err != nil {
			return nil, fmt.Errorf("read webhook delivery: %w", err)
		}
		d.State, d.CreatedAt, d.ScheduledAt, d.NextAt = webhook.State(state), fromMicros(created), fromMicros(scheduled), fromMicros(next)
		d.LastAttemptAt = fromNullMicros(last)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read webhook deliveries: %w", err)
	}
	return out, nil
}
