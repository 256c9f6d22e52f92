package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
)

// The images of users' messages (images.Store). Keys, after the prefix P:
//
//	P{id}:img                hash: image hash → tenant, the images session id refers to
//	P img:<hash>:<tenant>    hash: mt, size, created (micros), data
//	P imgref:<hash>:<tenant> set: the ids of the sessions that refer to it
//	P imgu:<tenant>          hash: n (images), b (bytes) of the tenant's images
//
// The hash comes first in an image's keys, being of fixed length, so no
// tenant name can make two keys alike. Deleting a session leaves its
// image set to ReleaseImages, which the kernel calls after DeleteSession.
var (
	scriptImagePut     = newScript("image_put")
	scriptImageLink    = newScript("image_link")
	scriptImageRelease = newScript("image_release")
)

func (s *Store) sessionImagesKey(id string) string { return s.prefix + "{" + id + "}:img" }
func (s *Store) imageKey(tenant, hash string) string {
	return s.prefix + "img:" + hash + ":" + tenant
}
func (s *Store) imageRefsKey(tenant, hash string) string {
	return s.prefix + "imgref:" + hash + ":" + tenant
}
func (s *Store) imageUsageKey(tenant string) string { return s.prefix + "imgu:" + tenant }

// PutImage keeps img once per tenant and hash and records that session
// sessionID refers to it; see images.Store.
func (s *Store) PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error {
	keys := []string{s.keysOf(sessionID).s, s.sessionImagesKey(sessionID), s.imageKey(img.Tenant, img.Hash),
		s.imageRefsKey(img.Tenant, img.Hash), s.imageUsageKey(img.Tenant)}
	err := scriptImagePut.Run(ctx, s.rdb, keys, sessionID, img.Tenant, img.Hash, img.MediaType, img.Size,
		img.CreatedAt.UnixMicro(), img.Data, max(maxTenantBytes, 0)).Err()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(sessionID)
	case isReply(err, replyFull):
		return session.ImageQuotaExceeded(img.Tenant, maxTenantBytes)
	case err != nil:
		return fmt.Errorf("put image %s: %w", img.Hash, err)
	}
	return nil
}

// GetImage returns image hash if session sessionID refers to it.
func (s *Store) GetImage(ctx context.Context, sessionID, hash string) (session.Image, error) {
	tenant, err := s.rdb.HGet(ctx, s.sessionImagesKey(sessionID), hash).Result()
	if errors.Is(err, goredis.Nil) {
		return session.Image{}, session.ImageNotFound(hash)
	}
	if err != nil {
		return session.Image{}, fmt.Errorf("get image %s: %w", hash, err)
	}
	f, err := s.rdb.HMGet(ctx, s.imageKey(tenant, hash), "mt", "size", "created", "data").Result()
	if err != nil {
		return session.Image{}, fmt.Errorf("get image %s: %w", hash, err)
	}
	img, ok := decodeImage(tenant, hash, f)
	if !ok {
		return session.Image{}, session.ImageNotFound(hash) // released meanwhile
	}
	img.Data = []byte(f[3].(string))
	return img, nil
}

// decodeImage reads the mt, size and created fields of an image's hash;
// ok is false when the image is gone.
func decodeImage(tenant, hash string, f []any) (session.Image, bool) {
	mt, ok1 := f[0].(string)
	size, ok2 := f[1].(string)
	created, ok3 := f[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return session.Image{}, false
	}
	n, _ := strconv.ParseInt(size, 10, 64)
	us, _ := strconv.ParseInt(created, 10, 64)
	return session.Image{Tenant: tenant, Hash: hash, MediaType: mt, Size: n, CreatedAt: time.UnixMicro(us).UTC()}, true
}

// ListImages returns the images session sessionID refers to, without
// their bytes, by hash.
func (s *Store) ListImages(ctx context.Context, sessionID string) ([]session.Image, error) {
	held, err := s.rdb.HGetAll(ctx, s.sessionImagesKey(sessionID)).Result()
	if err != nil {
		return nil, fmt.Errorf("list images of session %s: %w", sessionID, err)
	}
	hashes := make([]string, 0, len(held))
	for h := range held {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	cmds := make([]*goredis.SliceCmd, len(hashes))
	_, err = s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, h := range hashes {
			cmds[i] = p.HMGet(ctx, s.imageKey(held[h], h), "mt", "size", "created")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list images of session %s: %w", sessionID, err)
	}
	out := []session.Image{}
	for i, h := range hashes {
		if img, ok := decodeImage(held[h], h, cmds[i].Val()); ok {
			out = append(out, img)
		}
	}
	return out, nil
}

// LinkImages makes session to refer to every image session from refers to.
func (s *Store) LinkImages(ctx context.Context, from, to string) error {
	keys := []string{s.keysOf(to).s, s.sessionImagesKey(to), s.sessionImagesKey(from)}
	err := scriptImageLink.Run(ctx, s.rdb, keys, s.prefix, to).Err()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(to)
	case err != nil:
		return fmt.Errorf("link images of session %s to %s: %w", from, to, err)
	}
	return nil
}

// ReleaseImages drops session sessionID's references and deletes the
// images no session refers to any more.
func (s *Store) ReleaseImages(ctx context.Context, sessionID string) error {
	err := scriptImageRelease.Run(ctx, s.rdb, []string{s.sessionImagesKey(sessionID)}, s.prefix, sessionID).Err()
	if err != nil {
		return fmt.Errorf("release images of session %s: %w", sessionID, err)
	}
	return nil
}

// ImageUsage returns how many images tenant keeps and their bytes.
func (s *Store) ImageUsage(ctx context.Context, tenant string) (session.ImageUsage, error) {
	f, err := s.rdb.HMGet(ctx, s.imageUsageKey(tenant), "n", "b").Result()
	if err != nil {
		return session.ImageUsage{}, fmt.Errorf("image usage of tenant %q: %w", tenant, err)
	}
	var u session.ImageUsage
	if n, ok := f[0].(string); ok {
		u.Images, _ = strconv.Atoi(strings.TrimSpace(n))
	}
	if b, ok := f[1].(string); ok {
		u.Bytes, _ = strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	}
	return u, nil
}
