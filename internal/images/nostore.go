package images

import (
	"context"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// noStore is the Store of a library given none: it keeps nothing.
type noStore struct{}

func (noStore) PutImage(context.Context, string, session.Image, int64) error {
	return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeImagesNotKept, "this server keeps no images")
}

func (noStore) GetImage(_ context.Context, _, hash string) (session.Image, error) {
	return session.Image{}, session.ImageNotFound(hash)
}

func (noStore) ListImages(context.Context, string) ([]session.Image, error) {
	return []session.Image{}, nil
}

func (noStore) LinkImages(context.Context, string, string) error { return nil }

func (noStore) ReleaseImages(context.Context, string) error { return nil }

func (noStore) ImageUsage(context.Context, string) (session.ImageUsage, error) {
	return session.ImageUsage{}, nil
}
