package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/webhook"
)

var _ webhook.Outbox = (*Store)(nil)

// deliveryColumns is the column list scanDelivery reads, in its order.
const deliveryColumns = `id, tenant, session_id, type, url, key_id, body, state, attempts, created_at,
	scheduled_at, next_at, last_attempt_at, last_status, last_error, claim`

// The outbox's statements. A claim skips rows another replica's claim is
// locking rather than waiting for them, so two dispatchers claiming
// together each take different deliveries, and neither blocks.
const (
	addDeliverySQL = `INSERT INTO webhook_deliveries (id, tenant, session_id, type, url, key_id, body, state,
		attempts, created_at, scheduled_at, next_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 0, $8, $9, $10)
		ON CONFLICT (id) DO NOTHING`
	claimDeliveriesSQL = `UPDATE webhook_deliveries SET claim = $1, claim_until = $2
		WHERE id IN (SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_at <= $3 AND claim_until <= $3
			ORDER BY next_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING ` + deliveryColumns
	finishAttemptSQL = `UPDATE webhook_deliveries SET state = $1, attempts = $2, next_at = $3, last_attempt_at = $4,
		last_status = $5, last_error = $6, claim = '', claim_until = 0 WHERE id = $7 AND claim = $8 AND claim <> ''`
	redeliverSQL = `UPDATE webhook_deliveries SET state = 'pending', attempts = 0, scheduled_at = $1, next_at = $1,
		claim = '', claim_until = 0 WHERE id = $2 AND tenant = $3 AND state <> 'pending'
		RETURNING ` + deliveryColumns
	pruneDeliveriesSQL = `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND last_attempt_at < $1`
)

// AddDeliveries implements webhook.Outbox, in one transaction.
func (s *Store) AddDeliveries(ctx context.Context, ds ...webhook.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, d := range ds {
			b.Queue(addDeliverySQL, d.ID, d.Tenant, d.SessionID, d.Type, d.URL, d.KeyID, nonNil(d.Body),
				micros(d.CreatedAt), micros(d.ScheduledAt), micros(d.NextAt))
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("add webhook deliveries: %w", err)
		}
		return nil
	})
}

// nonNil keeps an empty body from being stored as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ClaimDeliveries implements webhook.Outbox.
func (s *Store) ClaimDeliveries(ctx context.Context, claim string, now time.Time, ttl time.Duration, limit int) ([]webhook.Delivery, error) {
	var out []webhook.Delivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimDeliveriesSQL, claim, micros(now.Add(ttl)), micros(now), limit)
		if err != nil {
			return fmt.Errorf("claim webhook deliveries: %w", err)
		}
		out, err = scanDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortDue(out)
	return out, nil
}

// FinishAttempt implements webhook.Outbox.
func (s *Store) FinishAttempt(ctx context.Context, d webhook.Delivery) error {
	tag, err := s.pool.Exec(ctx, finishAttemptSQL, string(d.State), d.Attempts, micros(d.NextAt),
		nullMicros(d.LastAttemptAt), d.LastStatus, d.LastError, d.ID, d.Claim)
	if err != nil {
		return fmt.Errorf("record webhook delivery %s: %w", d.ID, unavailable(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return webhook.ErrClaimLost
	}
	return nil
}

// GetDelivery implements webhook.Outbox.
func (s *Store) GetDelivery(ctx context.Context, tenant, id string) (webhook.Delivery, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = $1 AND tenant = $2`, id, tenant)
	if err != nil {
		return webhook.Delivery{}, fmt.Errorf("get webhook delivery %s: %w", id, unavailable(ctx, err))
	}
	ds, err := scanDeliveries(rows)
	if err != nil {
		return webhook.Delivery{}, fmt.Errorf("get webhook delivery %s: %w", id, unavailable(ctx, err))
	}
	if len(ds) == 0 {
		return webhook.Delivery{}, webhook.DeliveryNotFound(id)
	}
	ds[0].Claim = ""
	return ds[0], nil
}

// ListDeliveries implements webhook.Outbox.
func (s *Store) ListDeliveries(ctx context.Context, q webhook.Query) ([]webhook.Delivery, error) {
	var a args
	where := []string{"tenant = " + a.add(q.Tenant)}
	if q.State != "" {
		where = append(where, "state = "+a.add(string(q.State)))
	}
	if q.After != nil {
		at, id := a.add(micros(q.After.CreatedAt)), a.add(q.After.ID)
		where = append(where, "(created_at < "+at+" OR (created_at = "+at+" AND id < "+id+"))")
	}
	query := `SELECT ` + deliveryColumns + ` FROM webhook_deliveries WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limitArg(q.Limit))
	rows, err := s.pool.Query(ctx, query, a...)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", unavailable(ctx, err))
	}
	ds, err := scanDeliveries(rows)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", unavailable(ctx, err))
	}
	for i := range ds {
		ds[i].Claim = ""
	}
	return ds, nil
}

// RedeliverDelivery implements webhook.Outbox.
func (s *Store) RedeliverDelivery(ctx context.Context, tenant, id string, now time.Time) (webhook.Delivery, error) {
	var out webhook.Delivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, redeliverSQL, micros(now), id, tenant)
		if err != nil {
			return fmt.Errorf("redeliver webhook delivery %s: %w", id, err)
		}
		ds, err := scanDeliveries(rows)
		if err != nil {
			return fmt.Errorf("redeliver webhook delivery %s: %w", id, err)
		}
		if len(ds) == 1 {
			out = ds[0]
			return nil
		}
		var state string
		err = tx.QueryRow(ctx, `SELECT state FROM webhook_deliveries WHERE id = $1 AND tenant = $2`, id, tenant).Scan(&state)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return webhook.DeliveryNotFound(id)
		case err != nil:
			return fmt.Errorf("redeliver webhook delivery %s: %w", id, err)
		}
		return webhook.DeliveryPending(id)
	})
	return out, err
}

// PruneDeliveries implements webhook.Outbox.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, pruneDeliveriesSQL, micros(before))
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", unavailable(ctx, err))
	}
	return int(tag.RowsAffected()), nil
}

// sortDue orders claimed deliveries earliest due first: RETURNING keeps
// no order of its own.
func sortDue(ds []webhook.Delivery) {
	slices.SortFunc(ds, func(a, b webhook.Delivery) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), cmp.Compare(a.ID, b.ID))
	})
}

// scanDeliveries reads rows of deliveryColumns and closes them.
func scanDeliveries(rows pgx.Rows) ([]webhook.Delivery, error) {
	defer rows.Close()
	var out []webhook.Delivery
	for rows.Next() {
		var d webhook.Delivery
		var state string
		var created, scheduled, next int64
		var last *int64
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
