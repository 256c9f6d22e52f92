package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// The tenants' session feeds, in the table of migration 0010. The writer
// is the only one to write, so the next seq is the tenant's newest plus
// one, read in the same transaction.

// AppendFeed appends e to its tenant's feed, assigning e.Seq, and drops
// the entries more than keep older than it (none when keep <= 0).
func (s *Store) AppendFeed(ctx context.Context, e *session.FeedEntry, keep int) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		var last int64
		err = tx.conn.QueryRowContext(tx.ctx, `SELECT COALESCE(MAX(seq), 0) FROM feed WHERE tenant = ?`, e.Tenant).Scan(&last)
		if err != nil {
			return nil, fmt.Errorf("append feed: %w", err)
		}
		e.Seq = last + 1
		_, err = tx.conn.ExecContext(tx.ctx, `INSERT INTO feed (tenant, seq, session_id, kind, created_at, data)
			VALUES (?, ?, ?, ?, ?, ?)`, e.Tenant, e.Seq, e.SessionID, e.Kind, micros(e.Time), e.Data)
		if err != nil {
			return nil, fmt.Errorf("append feed: %w", err)
		}
		if keep > 0 && e.Seq > int64(keep) {
			if _, err = tx.conn.ExecContext(tx.ctx, `DELETE FROM feed WHERE tenant = ? AND seq <= ?`, e.Tenant, e.Seq-int64(keep)); err != nil {
				return nil, fmt.Errorf("trim feed: %w", err)
			}
		}
		return nil, nil
	})
}

// ReadFeed returns tenant's entries with seq > after, oldest first, at
// most limit of them (all when limit <= 0).
func (s *Store) ReadFeed(ctx context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error) {
	var out []session.FeedEntry
	err := s.readRows(ctx, func(rows *sql.Rows) error {
		for rows.Next() {
			e := session.FeedEntry{Tenant: tenant}
			var created int64
			if err := rows.Scan(&e.Seq, &e.SessionID, &e.Kind, &created, &e.Data); err != nil {
				return err
			}
			e.Time = fromMicros(created)
			out = append(out, e)
		}
		return rows.Err()
	}, `SELECT seq, session_id, kind, created_at, data FROM feed WHERE tenant = ? AND seq > ? ORDER BY seq`+limitClause(limit), tenant, after)
	if err != nil {
		return nil, fmt.Errorf("read feed: %w", err)
	}
	return out, nil
}

// FeedHead returns the newest seq of tenant's feed, 0 for none.
func (s *Store) FeedHead(ctx context.Context, tenant string) (int64, error) {
	var head int64
	err := s.readRow(ctx, func(row scanner) error { return row.Scan(&head) },
		`SELECT COALESCE(MAX(seq), 0) FROM feed WHERE tenant = ?`, tenant)
	if err != nil {
		return 0, fmt.Errorf("read feed head: %w", err)
	}
	return head, nil
}
