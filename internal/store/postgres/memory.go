package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// GetMemory returns the entry key of a session's memory.
func (s *Store) GetMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error) {
	e := session.MemoryEntry{SessionID: sessionID, Key: key}
	var updated int64
	err := s.pool.QueryRow(ctx, `SELECT value, updated_at FROM memory WHERE session_id = $1 AND key = $2`,
		sessionID, key).Scan(&e.Value, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.MemoryEntry{}, s.missing(ctx, sessionID, session.MemoryKeyNotFound(key))
	}
	if err != nil {
		return session.MemoryEntry{}, fmt.Errorf("get memory %q of session %s: %w", key, sessionID, unavailable(ctx, err))
	}
	e.UpdatedAt = fromMicros(updated)
	return e, nil
}

const putMemorySQL = `INSERT INTO memory (session_id, key, value, updated_at) VALUES ($1, $2, $3, $4)
	ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`

// PutMemory creates or replaces an entry. Creating one when the session
// already holds maxEntries is ErrExhausted; replacing one never is.
// maxEntries <= 0 means no limit. The session's row is locked, so two
// entries created together cannot both take the last place.
func (s *Store) PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockSession(ctx, tx, e.SessionID); err != nil {
			return err
		}
		if maxEntries > 0 {
			var count int
			var exists bool
			err := tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(key = $1), false) FROM memory
				WHERE session_id = $2`, e.Key, e.SessionID).Scan(&count, &exists)
			if err != nil {
				return fmt.Errorf("count entries: %w", err)
			}
			if !exists && count >= maxEntries {
				return errdefs.New(errdefs.ErrExhausted, errdefs.CodeMemoryFull,
					"session %s already holds %d memory entries", e.SessionID, maxEntries)
			}
		}
		_, err := tx.Exec(ctx, putMemorySQL, e.SessionID, e.Key, e.Value, micros(e.UpdatedAt))
		return err
	})
	return wrapUnlessKnown(err, "put memory %q", e.Key)
}

// DeleteMemory removes the entry key of a session's memory.
func (s *Store) DeleteMemory(ctx context.Context, sessionID, key string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM memory WHERE session_id = $1 AND key = $2`, sessionID, key)
	if err != nil {
		return fmt.Errorf("delete memory %q: %w", key, unavailable(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return s.missing(ctx, sessionID, session.MemoryKeyNotFound(key))
	}
	return nil
}

// ListMemory returns a session's entries sorted by key in byte order (the
// column's collation is "C").
func (s *Store) ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, value, updated_at FROM memory
		WHERE session_id = $1 ORDER BY key`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list memory of session %s: %w", sessionID, unavailable(ctx, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (session.MemoryEntry, error) {
		e := session.MemoryEntry{SessionID: sessionID}
		var updated int64
		err := row.Scan(&e.Key, &e.Value, &updated)
		e.UpdatedAt = fromMicros(updated)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list memory of session %s: %w", sessionID, unavailable(ctx, err))
	}
	if len(out) == 0 {
		return []session.MemoryEntry{}, s.missing(ctx, sessionID, nil)
	}
	return out, nil
}
