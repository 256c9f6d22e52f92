package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/session"
)

// The tenants' session feeds, in the tables of migration 0006. Every
// replica reads the same table, so a subscriber on any replica sees the
// entries appended by any other.

// appendFeedSQL appends an entry in one statement: it takes the tenant's
// next seq, inserts the entry and drops the ones more than $6 older ($6 >
// 0). Being one statement, it holds the tenant's head row only while
// Postgres runs it, never while the client is between round trips: a
// replica that stops (SIGSTOP, a long GC pause) mid-append cannot keep
// the other replicas from appending to the tenant's feed.
const appendFeedSQL = `WITH h AS (
	INSERT INTO feed_heads AS h (tenant, seq) VALUES ($1, 1)
	ON CONFLICT (tenant) DO UPDATE SET seq = h.seq + 1 RETURNING h.seq
), ins AS (
	INSERT INTO feed (tenant, seq, session_id, kind, created_at, data)
	SELECT $1, h.seq, $2, $3, $4, $5 FROM h
), del AS (
	DELETE FROM feed WHERE tenant = $1 AND $6::bigint > 0 AND seq <= (SELECT seq FROM h) - $6::bigint
)
SELECT seq FROM h`

// AppendFeed appends e to its tenant's feed, assigning e.Seq, and drops
// the entries more than keep older than it (none when keep <= 0).
func (s *Store) AppendFeed(ctx context.Context, e *session.FeedEntry, keep int) error {
	err := s.pool.QueryRow(ctx, appendFeedSQL, e.Tenant, e.SessionID, e.Kind, micros(e.Time), nonNil(e.Data),
		int64(keep)).Scan(&e.Seq)
	if err != nil {
		return fmt.Errorf("append feed: %w", s.failed(ctx, err))
	}
	return nil
}

// ReadFeed returns tenant's entries with seq > after, oldest first, at
// most limit of them (all when limit <= 0).
func (s *Store) ReadFeed(ctx context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, session_id, kind, created_at, data FROM feed
		WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3`, tenant, after, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("read feed: %w", unavailable(ctx, err))
	}
	defer rows.Close()
	var out []session.FeedEntry
	for rows.Next() {
		e := session.FeedEntry{Tenant: tenant}
		var created int64
		if err := rows.Scan(&e.Seq, &e.SessionID, &e.Kind, &created, &e.Data); err != nil {
			return nil, fmt.Errorf("read feed: %w", err)
		}
		e.Time = fromMicros(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read feed: %w", unavailable(ctx, err))
	}
	return out, nil
}

// FeedHead returns the newest seq of tenant's feed, 0 for none.
func (s *Store) FeedHead(ctx context.Context, tenant string) (int64, error) {
	var head int64
	err := s.pool.QueryRow(ctx, `SELECT seq FROM feed_heads WHERE tenant = $1`, tenant).Scan(&head)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("read feed head: %w", unavailable(ctx, err))
	}
	return head, nil
}
