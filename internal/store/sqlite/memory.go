package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// GetMemory returns the entry key of a session's memory.
func (s *Store) GetMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return session.MemoryEntry{}, fmt.Errorf("get memory %q of session %s: %w", key, sessionID, err)
	}
	defer s.release(r)
	ctx = brief(ctx)
	e := session.MemoryEntry{SessionID: sessionID, Key: key}
	var updated int64
	err = r.queryRow(ctx, `SELECT value, updated_at FROM memory
		WHERE session_id = ? AND key = ?`, sessionID, key).Scan(&e.Value, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return session.MemoryEntry{}, r.missingKey(ctx, sessionID, key)
	}
	if err != nil {
		return session.MemoryEntry{}, fmt.Errorf("get memory %q of session %s: %w", key, sessionID, err)
	}
	e.UpdatedAt = fromMicros(updated)
	return e, nil
}

// countMemorySQL counts a session's entries and whether one has a key.
const countMemorySQL = `SELECT count(*), coalesce(sum(key = ?), 0) FROM memory WHERE session_id = ?`

const putMemorySQL = `INSERT INTO memory (session_id, key, value, updated_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`

// PutMemory creates or replaces an entry. Creating one when the session
// already holds maxEntries is ErrExhausted; replacing one never is.
// maxEntries <= 0 means no limit.
func (s *Store) PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		if own, err := tx.requireSession(e.SessionID); own != nil || err != nil {
			return own, err
		}
		if maxEntries > 0 {
			if own, err := tx.checkRoom(e, maxEntries); own != nil || err != nil {
				return own, err
			}
		}
		_, err = tx.exec(stmtPutMemory, e.SessionID, e.Key, e.Value, micros(e.UpdatedAt))
		if err != nil {
			return nil, fmt.Errorf("put memory %q: %w", e.Key, err)
		}
		return nil, nil
	})
}

// checkRoom fails with ErrExhausted if storing e would add an entry to a
// session that already holds maxEntries.
func (tx *batchTx) checkRoom(e session.MemoryEntry, maxEntries int) (own, err error) {
	var count, exists int
	if err := tx.queryRow(stmtCountMemory, e.Key, e.SessionID).Scan(&count, &exists); err != nil {
		return nil, fmt.Errorf("put memory %q: count entries: %w", e.Key, err)
	}
	if exists == 0 && count >= maxEntries {
		return errdefs.New(errdefs.ErrExhausted, errdefs.CodeMemoryFull,
			"session %s already holds %d memory entries", e.SessionID, maxEntries), nil
	}
	return nil, nil
}

// DeleteMemory removes the entry key of a session's memory.
func (s *Store) DeleteMemory(ctx context.Context, sessionID, key string) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		deleted, err := tx.exec(stmtDeleteMemory, sessionID, key)
		if err != nil {
			return nil, fmt.Errorf("delete memory %q: %w", key, err)
		}
		if deleted {
			return nil, nil
		}
		if own, err := tx.requireSession(sessionID); own != nil || err != nil {
			return own, err
		}
		return session.MemoryKeyNotFound(key), nil
	})
}

// ListMemory returns a session's entries sorted by key in byte order,
// which is how SQLite's default BINARY collation compares text.
func (s *Store) ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list memory of session %s: %w", sessionID, err)
	}
	defer s.release(r)
	ctx = brief(ctx) // bounded by the sessions' entry limit
	rows, err := r.query(ctx, `SELECT key, value, updated_at FROM memory
		WHERE session_id = ? ORDER BY key`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list memory of session %s: %w", sessionID, err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	out := []session.MemoryEntry{}
	for rows.Next() {
		e := session.MemoryEntry{SessionID: sessionID}
		var updated int64
		if err := rows.Scan(&e.Key, &e.Value, &updated); err != nil {
			return nil, fmt.Errorf("list memory of session %s: %w", sessionID, err)
		}
		e.UpdatedAt = fromMicros(updated)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list memory of session %s: %w", sessionID, err)
	}
	if len(out) == 0 {
		if err := r.requireSession(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// missingKey returns the not-found error for key: the session's, if it
// is the session that is missing.
func (r *reader) missingKey(ctx context.Context, sessionID, key string) error {
	if err := r.requireSession(ctx, sessionID); err != nil {
		return err
	}
	return session.MemoryKeyNotFound(key)
}
