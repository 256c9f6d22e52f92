package images_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// newLibrary returns a library over a memory store holding one session of
// tenant acme, and that session's id.
func newLibrary(t *testing.T, limits images.Limits) (*images.Library, *memory.Store, string) {
	t.Helper()
	st := memory.New()
	s := session.Session{ID: session.NewID(), Tenant: "acme", Agent: "helper", State: session.StateActive}
	s.RootID = s.ID
	require.NoError(t, st.CreateSession(t.Context(), s))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return images.New(st, limits, func() time.Time { return now }), st, s.ID
}

func TestLibrary_Check(t *testing.T) {
	lib, _, _ := newLibrary(t, images.Limits{MaxBytes: 1000, MaxURLLength: 40})
	tests := []struct {
		name string
		in   images.Input
		want string // "" for none
	}{
		{"png", images.Input{MediaType: "image/png", Data: imagestest.PNG()}, ""},
		{"jpeg", images.Input{MediaType: "image/jpeg", Data: imagestest.JPEG()}, ""},
		{"gif", images.Input{MediaType: "image/gif", Data: imagestest.GIF()}, ""},
		{"webp", images.Input{MediaType: "image/webp", Data: imagestest.WebP()}, ""},
		{"url", images.Input{URL: "https://example.com/a.png"}, ""},
		{"url with a media type", images.Input{URL: "http://example.com/a", MediaType: "image/gif"}, ""},
		{"another media type", images.Input{MediaType: "image/svg+xml", Data: []byte("<svg/>")},
			"is image/svg+xml; images may be image/png, image/jpeg, image/gif, image/webp"},
		{"bytes of another type", images.Input{MediaType: "image/png", Data: imagestest.JPEG()},
			"says image/png but its bytes are image/jpeg"},
		{"bytes of no image", images.Input{MediaType: "image/png", Data: []byte("hello, world")},
			"says image/png but its bytes are of no known image type"},
		{"too large", images.Input{MediaType: "image/png", Data: append(imagestest.PNG(), make([]byte, 1000)...)},
			"bytes; an image may have at most 1000"},
		{"no bytes", images.Input{MediaType: "image/png", Data: []byte{}}, "has no bytes"},
		{"url of another scheme", images.Input{URL: "file:///etc/passwd"}, "not an absolute http or https URL"},
		{"relative url", images.Input{URL: "/a.png"}, "not an absolute http or https URL"},
		{"url too long", images.Input{URL: "https://example.com/" + strings.Repeat("a", 40)}, "at most 40 are allowed"},
		{"url of another media type", images.Input{URL: "https://example.com/a", MediaType: "image/bmp"}, "is image/bmp"},
		{"both", images.Input{URL: "https://example.com/a", MediaType: "image/png", Data: imagestest.PNG()}, "has both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := lib.Check(tt.in)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, "invalid_image", string(errdefs.CodeOf(err)))
		})
	}
}

func TestLibrary_FromDataAndURL(t *testing.T) {
	lib, _, _ := newLibrary(t, images.Limits{MaxBytes: 200})
	png := imagestest.PNG()
	b64 := imagestest.Base64(png)

	in, err := lib.FromData("IMAGE/PNG", b64)
	require.NoError(t, err)
	assert.Equal(t, images.Input{MediaType: "image/png", Data: png}, in, "media types compare in lower case")
	in, err = lib.FromData("image/png", strings.TrimRight(b64, "="))
	require.NoError(t, err, "padding may be left out")
	assert.Equal(t, png, in.Data)
	_, err = lib.FromData("image/png", "not base64!")
	require.ErrorContains(t, err, "is not base64 text")
	_, err = lib.FromData("image/png", strings.Repeat("A", 400))
	require.ErrorContains(t, err, "an image may have at most 200", "refused before decoding")

	in, err = lib.FromURL("", "data:image/png;base64,"+b64)
	require.NoError(t, err)
	assert.Equal(t, images.Input{MediaType: "image/png", Data: png}, in, "a data URL carries bytes")
	_, err = lib.FromURL("image/gif", "data:image/png;base64,"+b64)
	require.ErrorContains(t, err, "says image/gif but its data URL says image/png")
	_, err = lib.FromURL("", "data:image/png,raw")
	require.ErrorContains(t, err, "not data:<media type>;base64,<data>")
	in, err = lib.FromURL("", "https://example.com/a.png")
	require.NoError(t, err)
	assert.Equal(t, images.Input{URL: "https://example.com/a.png"}, in)
}

// TestLibrary_PutLoad stores a message's images, loads them back as the
// model receives them, and checks what is kept once.
func TestLibrary_PutLoad(t *testing.T) {
	lib, st, id := newLibrary(t, images.Limits{})
	png, gif := imagestest.PNG(), imagestest.GIF()
	ins := []images.Input{
		{MediaType: "image/png", Data: png},
		{URL: "https://example.com/a.jpg", MediaType: "image/jpeg"},
		{MediaType: "image/gif", Data: gif},
		{MediaType: "image/png", Data: png}, // the same picture twice
	}
	refs, err := lib.Put(t.Context(), "acme", id, ins)
	require.NoError(t, err)
	assert.Equal(t, []session.ImageRef{
		{Hash: session.ImageHash(png), MediaType: "image/png"},
		{URL: "https://example.com/a.jpg", MediaType: "image/jpeg"},
		{Hash: session.ImageHash(gif), MediaType: "image/gif"},
		{Hash: session.ImageHash(png), MediaType: "image/png"},
	}, refs)

	got, err := lib.Load(t.Context(), id, refs)
	require.NoError(t, err)
	assert.Equal(t, []llm.Image{
		{MediaType: "image/png", Data: png},
		{URL: "https://example.com/a.jpg", MediaType: "image/jpeg"},
		{MediaType: "image/gif", Data: gif},
		{MediaType: "image/png", Data: png},
	}, got)

	u, err := lib.Usage(t.Context(), "acme")
	require.NoError(t, err)
	assert.Equal(t, session.ImageUsage{Images: 2, Bytes: int64(len(png) + len(gif))}, u)

	img, err := lib.Get(t.Context(), id, session.ImageHash(gif))
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), img.CreatedAt)
	_, err = lib.Get(t.Context(), id, "../../etc/passwd")
	require.ErrorIs(t, err, errdefs.ErrNotFound)

	require.NoError(t, st.DeleteSession(t.Context(), id))
	require.NoError(t, lib.Release(t.Context(), id))
	_, err = lib.Load(t.Context(), id, refs)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
}

func TestLibrary_PutRefuses(t *testing.T) {
	lib, _, id := newLibrary(t, images.Limits{MaxPerMessage: 2, MaxTenantBytes: int64(len(imagestest.PNG()))})
	png := images.Input{MediaType: "image/png", Data: imagestest.PNG()}
	_, err := lib.Put(t.Context(), "acme", id, []images.Input{png, png, png})
	require.ErrorContains(t, err, "has 3 images; a message may carry at most 2")

	_, err = lib.Put(t.Context(), "acme", id, []images.Input{png, {MediaType: "image/gif", Data: imagestest.GIF()}})
	require.ErrorIs(t, err, errdefs.ErrExhausted, "the tenant has room for the PNG alone")
	assert.Equal(t, "image_quota_exceeded", string(errdefs.CodeOf(err)))

	_, err = lib.Put(t.Context(), "acme", id, []images.Input{{MediaType: "image/gif", Data: imagestest.PNG()}})
	require.ErrorContains(t, err, "image 0: says image/gif but its bytes are image/png")

	_, err = lib.Put(t.Context(), "globex", id, []images.Input{png})
	require.ErrorIs(t, err, errdefs.ErrNotFound, "another tenant's session")
}
