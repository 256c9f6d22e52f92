package images

import (
	"context"
	"fmt"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// Put keeps the images of one message of session sessionID, of tenant,
// and returns what the message keeps of them, in order: a hash and media
// type for bytes, the URL (and media type, if given) for a URL. Each
// input is checked again; the bytes of one already kept are not stored
// twice. A tenant past its MaxTenantBytes is ErrExhausted.
func (l *Library) Put(ctx context.Context, tenant, sessionID string, ins []Input) ([]session.ImageRef, error) {
	if err := l.CheckCount(len(ins)); err != nil {
		return nil, err
	}
	refs := make([]session.ImageRef, len(ins))
	for i, in := range ins {
		if err := l.Check(in); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		if in.URL != "" {
			refs[i] = session.ImageRef{URL: in.URL, MediaType: in.MediaType}
			continue
		}
		img := session.Image{Tenant: tenant, Hash: session.ImageHash(in.Data), MediaType: in.MediaType,
			Size: int64(len(in.Data)), Data: in.Data, CreatedAt: l.now().UTC()}
		if err := l.store.PutImage(ctx, sessionID, img, l.limits.MaxTenantBytes); err != nil {
			return nil, fmt.Errorf("store image %d: %w", i, err)
		}
		refs[i] = session.ImageRef{Hash: img.Hash, MediaType: img.MediaType}
	}
	return refs, nil
}

// Load returns the images refs name, for a model call of session
// sessionID: stored bytes read back, URLs as they are. An image the
// session no longer refers to is ErrNotFound.
func (l *Library) Load(ctx context.Context, sessionID string, refs []session.ImageRef) ([]llm.Image, error) {
	out := make([]llm.Image, len(refs))
	for i, ref := range refs {
		if ref.Hash == "" {
			out[i] = llm.Image{URL: ref.URL, MediaType: ref.MediaType}
			continue
		}
		img, err := l.store.GetImage(ctx, sessionID, ref.Hash)
		if err != nil {
			return nil, fmt.Errorf("load image %s: %w", ref.Hash, err)
		}
		out[i] = llm.Image{MediaType: img.MediaType, Data: img.Data}
	}
	return out, nil
}

// Get returns image hash of session sessionID, bytes included. A hash
// that is not one (session.ValidImageHash) is not found either.
func (l *Library) Get(ctx context.Context, sessionID, hash string) (session.Image, error) {
	if !session.ValidImageHash(hash) {
		return session.Image{}, session.ImageNotFound(hash)
	}
	return l.store.GetImage(ctx, sessionID, hash)
}

// List returns the images session sessionID refers to, without bytes.
func (l *Library) List(ctx context.Context, sessionID string) ([]session.Image, error) {
	return l.store.ListImages(ctx, sessionID)
}

// Share makes session to refer to the images session from refers to, for
// a fork of its history.
func (l *Library) Share(ctx context.Context, from, to string) error {
	return l.store.LinkImages(ctx, from, to)
}

// Release drops session sessionID's images, once it is deleted; images no
// other session refers to are deleted with it.
func (l *Library) Release(ctx context.Context, sessionID string) error {
	return l.store.ReleaseImages(ctx, sessionID)
}

// Usage returns what tenant's images take.
func (l *Library) Usage(ctx context.Context, tenant string) (session.ImageUsage, error) {
	return l.store.ImageUsage(ctx, tenant)
}
