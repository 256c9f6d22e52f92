package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/session"
)

// The images of users' messages (images.Store), in the tables of
// migration 0005.

var _ images.Store = (*Store)(nil)

// PutImage keeps img once per tenant and hash and records that session
// sessionID refers to it; see images.Store.
func (s *Store) PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND tenant = $2 FOR KEY SHARE`,
			sessionID, img.Tenant).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return session.SessionNotFound(sessionID)
		}
		if err != nil {
			return fmt.Errorf("put image: look up session %s: %w", sessionID, err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('kerneld images ' || $1))`, img.Tenant); err != nil {
			return fmt.Errorf("put image: %w", err)
		}
		var used int64
		var kept bool
		err = tx.QueryRow(ctx, `SELECT coalesce(sum(size), 0), coalesce(bool_or(hash = $2), false)
			FROM images WHERE tenant = $1`, img.Tenant, img.Hash).Scan(&used, &kept)
		if err != nil {
			return fmt.Errorf("put image: usage of tenant: %w", err)
		}
		if !kept {
			if maxTenantBytes > 0 && used+img.Size > maxTenantBytes {
				return session.ImageQuotaExceeded(img.Tenant, maxTenantBytes)
			}
			_, err := tx.Exec(ctx, `INSERT INTO images (tenant, hash, media_type, size, created_at, data)
				VALUES ($1, $2, $3, $4, $5, $6)`, img.Tenant, img.Hash, img.MediaType, img.Size, micros(img.CreatedAt), nonNil(img.Data))
			if err != nil {
				return fmt.Errorf("put image: %w", err)
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO image_refs (session_id, tenant, hash) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, sessionID, img.Tenant, img.Hash)
		if err != nil {
			return fmt.Errorf("put image: refer to it: %w", err)
		}
		return nil
	})
}

// GetImage returns image hash if session sessionID refers to it.
func (s *Store) GetImage(ctx context.Context, sessionID, hash string) (session.Image, error) {
	img := session.Image{Hash: hash}
	var created int64
	err := s.pool.QueryRow(ctx, `SELECT i.tenant, i.media_type, i.size, i.created_at, i.data
		FROM image_refs r JOIN images i ON i.tenant = r.tenant AND i.hash = r.hash
		WHERE r.session_id = $1 AND r.hash = $2`, sessionID, hash).Scan(&img.Tenant, &img.MediaType, &img.Size, &created, &img.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Image{}, session.ImageNotFound(hash)
	}
	if err != nil {
		return session.Image{}, fmt.Errorf("get image %s: %w", hash, unavailable(ctx, err))
	}
	img.CreatedAt = fromMicros(created)
	return img, nil
}

// ListImages returns the images session sessionID refers to, without
// their bytes, by hash.
func (s *Store) ListImages(ctx context.Context, sessionID string) ([]session.Image, error) {
	rows, err := s.pool.Query(ctx, `SELECT i.tenant, i.hash, i.media_type, i.size, i.created_at
		FROM image_refs r JOIN images i ON i.tenant = r.tenant AND i.hash = r.hash
		WHERE r.session_id = $1 ORDER BY r.hash`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list images of session %s: %w", sessionID, unavailable(ctx, err))
	}
	defer rows.Close()
	out := []session.Image{}
	for rows.Next() {
		var img session.Image
		var created int64
		if err := rows.Scan(&img.Tenant, &img.Hash, &img.MediaType, &img.Size, &created); err != nil {
			return nil, fmt.Errorf("list images of session %s: %w", sessionID, err)
		}
		img.CreatedAt = fromMicros(created)
		out = append(out, img)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list images of session %s: %w", sessionID, unavailable(ctx, err))
	}
	return out, nil
}

// LinkImages makes session to refer to every image session from refers to.
func (s *Store) LinkImages(ctx context.Context, from, to string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockSession(ctx, tx, to); err != nil {
			return wrapUnlessKnown(err, "link images of session %s to %s", from, to)
		}
		_, err := tx.Exec(ctx, `INSERT INTO image_refs (session_id, tenant, hash)
			SELECT $1, tenant, hash FROM image_refs WHERE session_id = $2 ON CONFLICT DO NOTHING`, to, from)
		if err != nil {
			return fmt.Errorf("link images of session %s to %s: %w", from, to, err)
		}
		return nil
	})
}

// ReleaseImages drops session sessionID's references; the trigger of
// migration 0005 deletes the images no session refers to any more.
// Deleting the session has done both already.
func (s *Store) ReleaseImages(ctx context.Context, sessionID string) error {
	if err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM image_refs WHERE session_id = $1`, sessionID)
		return err
	}); err != nil {
		return fmt.Errorf("release images of session %s: %w", sessionID, err)
	}
	return nil
}

// ImageUsage returns how many images tenant keeps and their bytes.
func (s *Store) ImageUsage(ctx context.Context, tenant string) (session.ImageUsage, error) {
	var u session.ImageUsage
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM images WHERE tenant = $1`, tenant).
		Scan(&u.Images, &u.Bytes)
	if err != nil {
		return u, fmt.Errorf("image usage of tenant %q: %w", tenant, unavailable(ctx, err))
	}
	return u, nil
}
