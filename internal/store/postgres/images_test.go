package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestStore_Images(t *testing.T) {
	pgtest.Require(t)
	storetest.RunImages(t, func(t *testing.T) storetest.ImageStore { return openStore(t) })
}

// TestStore_DeleteSessionReleasesImages checks what the suite cannot ask
// of every backend: here deleting a session releases its images in the
// same transaction (the cascade fires the trigger), so a crash before
// ReleaseImages leaks nothing.
func TestStore_DeleteSessionReleasesImages(t *testing.T) {
	st := openStore(t)
	a, b := newSession(), newSession()
	require.NoError(t, st.CreateSession(t.Context(), a))
	require.NoError(t, st.CreateSession(t.Context(), b))
	data := []byte("\x89PNG\r\n\x1a\n")
	img := session.Image{Tenant: "acme", Hash: session.ImageHash(data), MediaType: "image/png",
		Size: int64(len(data)), Data: data}
	require.NoError(t, st.PutImage(t.Context(), a.ID, img, 0))
	require.NoError(t, st.PutImage(t.Context(), b.ID, img, 0))

	require.NoError(t, st.DeleteSession(t.Context(), a.ID))
	u, err := st.ImageUsage(t.Context(), "acme")
	require.NoError(t, err)
	assert.Equal(t, session.ImageUsage{Images: 1, Bytes: img.Size}, u, "b still refers to the image")

	require.NoError(t, st.DeleteSession(t.Context(), b.ID))
	u, err = st.ImageUsage(t.Context(), "acme")
	require.NoError(t, err)
	assert.Equal(t, session.ImageUsage{}, u, "the last reference went with b")
}
