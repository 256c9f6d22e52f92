package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// The images of users' messages (images.Store), in the tables of
// migration 0008. Writes go through the writer like every other; they are
// rare and carry large values, so their statements are not among the
// writer's prepared ones.

// PutImage keeps img once per tenant and hash and records that session
// sessionID refers to it; see images.Store.
func (s *Store) PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		if own, err := tx.requireTenantSession(sessionID, img.Tenant); own != nil || err != nil {
			return own, err
		}
		var kept int
		err = tx.conn.QueryRowContext(tx.ctx, `SELECT count(*) FROM images WHERE tenant = ? AND hash = ?`,
			img.Tenant, img.Hash).Scan(&kept)
		if err != nil {
			return nil, fmt.Errorf("put image: %w", err)
		}
		if kept == 0 {
			if own, err := tx.insertImage(img, maxTenantBytes); own != nil || err != nil {
				return own, err
			}
		}
		_, err = tx.conn.ExecContext(tx.ctx, `INSERT OR IGNORE INTO image_refs (session_id, tenant, hash)
			VALUES (?, ?, ?)`, sessionID, img.Tenant, img.Hash)
		if err != nil {
			return nil, fmt.Errorf("put image: refer to it: %w", err)
		}
		return nil, nil
	})
}

// requireTenantSession returns, as the call's own failure, ErrNotFound if
// session id is missing or not of tenant.
func (tx *batchTx) requireTenantSession(id, tenant string) (own, err error) {
	var one int
	err = tx.conn.QueryRowContext(tx.ctx, `SELECT 1 FROM sessions WHERE id = ? AND tenant = ?`, id, tenant).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return session.SessionNotFound(id), nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up session %s: %w", id, err)
	}
	return nil, nil
}

// insertImage stores img's bytes unless they would take its tenant past
// maxTenantBytes (when above 0), which is the call's own failure.
func (tx *batchTx) insertImage(img session.Image, maxTenantBytes int64) (own, err error) {
	if maxTenantBytes > 0 {
		var used int64
		err := tx.conn.QueryRowContext(tx.ctx, `SELECT coalesce(sum(size), 0) FROM images WHERE tenant = ?`,
			img.Tenant).Scan(&used)
		if err != nil {
			return nil, fmt.Errorf("put image: usage of tenant: %w", err)
		}
		if used+img.Size > maxTenantBytes {
			return session.ImageQuotaExceeded(img.Tenant, maxTenantBytes), nil
		}
	}
	_, err = tx.conn.ExecContext(tx.ctx, `INSERT INTO images (tenant, hash, media_type, size, created_at, data)
		VALUES (?, ?, ?, ?, ?, ?)`, img.Tenant, img.Hash, img.MediaType, img.Size, micros(img.CreatedAt), img.Data)
	if err != nil {
		return nil, fmt.Errorf("put image: %w", err)
	}
	return nil, nil
}

// GetImage returns image hash if session sessionID refers to it.
func (s *Store) GetImage(ctx context.Context, sessionID, hash string) (session.Image, error) {
	img := session.Image{Hash: hash}
	var created int64
	err := s.readRow(ctx, func(row scanner) error {
		return row.Scan(&img.Tenant, &img.MediaType, &img.Size, &created, &img.Data)
	}, `SELECT i.tenant, i.media_type, i.size, i.created_at, i.data
		FROM image_refs r JOIN images i ON i.tenant = r.tenant AND i.hash = r.hash
		WHERE r.session_id = ? AND r.hash = ?`, sessionID, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return session.Image{}, session.ImageNotFound(hash)
	}
	if err != nil {
		return session.Image{}, fmt.Errorf("get image %s: %w", hash, err)
	}
	img.CreatedAt = fromMicros(created)
	return img, nil
}

// ListImages returns the images session sessionID refers to, without
// their bytes, by hash.
func (s *Store) ListImages(ctx context.Context, sessionID string) ([]session.Image, error) {
	out := []session.Image{}
	err := s.readRows(ctx, func(rows *sql.Rows) error {
		for rows.Next() {
			var img session.Image
			var created int64
			if err := rows.Scan(&img.Tenant, &img.Hash, &img.MediaType, &img.Size, &created); err != nil {
				return err
			}
			img.CreatedAt = fromMicros(created)
			out = append(out, img)
		}
		return rows.Err()
	}, `SELECT i.tenant, i.hash, i.media_type, i.size, i.created_at
		FROM image_refs r JOIN images i ON i.tenant = r.tenant AND i.hash = r.hash
		WHERE r.session_id = ? ORDER BY r.hash`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list images of session %s: %w", sessionID, err)
	}
	return out, nil
}

// LinkImages makes session to refer to every image session from refers to.
func (s *Store) LinkImages(ctx context.Context, from, to string) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		if own, err := tx.requireSession(to); own != nil || err != nil {
			return own, err
		}
		_, err = tx.conn.ExecContext(tx.ctx, `INSERT OR IGNORE INTO image_refs (session_id, tenant, hash)
			SELECT ?, tenant, hash FROM image_refs WHERE session_id = ?`, to, from)
		if err != nil {
			return nil, fmt.Errorf("link images of session %s to %s: %w", from, to, err)
		}
		return nil, nil
	})
}

// ReleaseImages drops session sessionID's references; the trigger of
// migration 0008 deletes the images no session refers to any more.
// Deleting the session has done both already.
func (s *Store) ReleaseImages(ctx context.Context, sessionID string) error {
	return s.write(ctx, func(tx *batchTx) (own, err error) {
		if _, err := tx.conn.ExecContext(tx.ctx, `DELETE FROM image_refs WHERE session_id = ?`, sessionID); err != nil {
			return nil, fmt.Errorf("release images of session %s: %w", sessionID, err)
		}
		return nil, nil
	})
}

// ImageUsage returns how many images tenant keeps and their bytes.
func (s *Store) ImageUsage(ctx context.Context, tenant string) (session.ImageUsage, error) {
	var u session.ImageUsage
	err := s.readRow(ctx, func(row scanner) error { return row.Scan(&u.Images, &u.Bytes) },
		`SELECT count(*), coalesce(sum(size), 0) FROM images WHERE tenant = ?`, tenant)
	if err != nil {
		return u, fmt.Errorf("image usage of tenant %q: %w", tenant, err)
	}
	return u, nil
}

// encodeImageRefs returns a message's images as a JSON array, or nil
// (NULL) for none.
func encodeImageRefs(refs []session.ImageRef) (any, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(refs)
	if err != nil {
		return nil, fmt.Errorf("encode images: %w", err)
	}
	return string(b), nil
}

// decodeImageRefs reads what encodeImageRefs wrote.
func decodeImageRefs(b []byte) ([]session.ImageRef, error) {
	if b == nil {
		return nil, nil
	}
	var refs []session.ImageRef
	if err := json.Unmarshal(b, &refs); err != nil {
		return nil, fmt.Errorf("decode images: %w", err)
	}
	return refs, nil
}

// readRow runs query, which returns at most one row, on a reader of its
// own, and hands the row to scan. An index bounds every query it runs.
func (s *Store) readRow(ctx context.Context, scan func(scanner) error, query string, args ...any) error {
	r, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release(r)
	return scan(r.queryRow(brief(ctx), query, args...))
}

// readRows runs query on a reader of its own and hands its rows to read,
// then closes them.
func (s *Store) readRows(ctx context.Context, read func(*sql.Rows) error, query string, args ...any) error {
	r, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release(r)
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }() // rows.Err, which read returns, reports what matters
	return read(rows)
}
