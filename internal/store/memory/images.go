package memory

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/kerneld/kerneld/internal/session"
)

// imageTable holds the images sessions refer to (images.Store). Its lock
// comes after a record's: PutImage holds the session's read lock while it
// adds the reference, so that DeleteSession cannot slip in between.
type imageTable struct {
	mu     sync.Mutex
	blobs  map[imageKey]*storedImage
	refs   map[string]map[string]bool // session id → hashes it refers to
	tenant map[string]string          // session id → its tenant, for its refs
	usage  map[string]session.ImageUsage
}

type imageKey struct{ tenant, hash string }

type storedImage struct {
	img  session.Image
	refs map[string]bool // session ids
}

// PutImage keeps img once per tenant and hash and records that session
// sessionID refers to it; see images.Store.
func (s *Store) PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error {
	return s.read(sessionID, func(rec *record) error {
		if rec.sess.Tenant != img.Tenant {
			return session.SessionNotFound(sessionID)
		}
		t := &s.images
		t.mu.Lock()
		defer t.mu.Unlock()
		t.init()
		k := imageKey{img.Tenant, img.Hash}
		blob := t.blobs[k]
		if blob == nil {
			u := t.usage[img.Tenant]
			if maxTenantBytes > 0 && u.Bytes+img.Size > maxTenantBytes {
				return session.ImageQuotaExceeded(img.Tenant, maxTenantBytes)
			}
			img.Data = bytes.Clone(img.Data)
			blob = &storedImage{img: img, refs: map[string]bool{}}
			t.blobs[k] = blob
			t.usage[img.Tenant] = session.ImageUsage{Images: u.Images + 1, Bytes: u.Bytes + img.Size}
		}
		blob.refs[sessionID] = true
		if t.refs[sessionID] == nil {
			t.refs[sessionID] = map[string]bool{}
		}
		t.refs[sessionID][img.Hash] = true
		t.tenant[sessionID] = img.Tenant
		return nil
	})
}

func (t *imageTable) init() {
	if t.blobs == nil {
		t.blobs, t.refs = map[imageKey]*storedImage{}, map[string]map[string]bool{}
		t.tenant, t.usage = map[string]string{}, map[string]session.ImageUsage{}
	}
}

// GetImage returns image hash if session sessionID refers to it.
func (s *Store) GetImage(ctx context.Context, sessionID, hash string) (session.Image, error) {
	t := &s.images
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.refs[sessionID][hash] {
		return session.Image{}, session.ImageNotFound(hash)
	}
	img := t.blobs[imageKey{t.tenant[sessionID], hash}].img
	img.Data = bytes.Clone(img.Data)
	return img, nil
}

// ListImages returns the images session sessionID refers to, without
// their bytes, by hash.
func (s *Store) ListImages(ctx context.Context, sessionID string) ([]session.Image, error) {
	t := &s.images
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []session.Image{}
	for _, h := range slices.Sorted(maps.Keys(t.refs[sessionID])) {
		img := t.blobs[imageKey{t.tenant[sessionID], h}].img
		img.Data = nil
		out = append(out, img)
	}
	return out, nil
}

// LinkImages makes session to refer to every image session from refers to.
func (s *Store) LinkImages(ctx context.Context, from, to string) error {
	return s.read(to, func(*record) error {
		t := &s.images
		t.mu.Lock()
		defer t.mu.Unlock()
		t.init()
		tenant := t.tenant[from]
		for h := range t.refs[from] {
			t.blobs[imageKey{tenant, h}].refs[to] = true
			if t.refs[to] == nil {
				t.refs[to] = map[string]bool{}
			}
			t.refs[to][h] = true
			t.tenant[to] = tenant
		}
		return nil
	})
}

// ReleaseImages drops session sessionID's references and deletes the
// images no session refers to any more.
func (s *Store) ReleaseImages(ctx context.Context, sessionID string) error {
	t := &s.images
	t.mu.Lock()
	defer t.mu.Unlock()
	tenant := t.tenant[sessionID]
	for h := range t.refs[sessionID] {
		k := imageKey{tenant, h}
		blob := t.blobs[k]
		delete(blob.refs, sessionID)
		if len(blob.refs) == 0 {
			delete(t.blobs, k)
			u := t.usage[tenant]
			t.usage[tenant] = session.ImageUsage{Images: u.Images - 1, Bytes: u.Bytes - blob.img.Size}
		}
	}
	delete(t.refs, sessionID)
	delete(t.tenant, sessionID)
	return nil
}

// ImageUsage returns how many images tenant keeps and their bytes.
func (s *Store) ImageUsage(ctx context.Context, tenant string) (session.ImageUsage, error) {
	t := &s.images
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usage[tenant], nil
}
