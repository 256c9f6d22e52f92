package storetest

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// ImageStore is a store that keeps the images of its sessions' messages.
type ImageStore interface {
	kernel.Store
	images.Store
}

// RunImages runs the conformance suite of images.Store against the stores
// open returns, each fresh and closed by a cleanup open registers: images
// kept once per tenant and hash, the sessions that refer to them, the
// tenant's bound, and the images of messages and runs.
func RunImages(t *testing.T, open func(t *testing.T) ImageStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st ImageStore)
	}{
		{"put and get keep every field", testImageRoundTrip},
		{"a hash is kept once per tenant", testImageOncePerTenant},
		{"only a session that refers to an image gets it", testImageNotReferred},
		{"a missing session or another tenant's is not found", testImageSessionMissing},
		{"the tenant bound counts new bytes only", testImageQuota},
		{"list gives the session's images by hash, without bytes", testImageList},
		{"link shares a session's images with another", testImageLink},
		{"release deletes images no session refers to", testImageRelease},
		{"values never alias the store", testImageAliasing},
		{"messages and runs keep their images", testImageRefsKept},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { forgetStore(st) })
			tc.fn(t, st)
		})
	}
}

// newImage returns an image of tenant acme holding data.
func newImage(data string) session.Image {
	return session.Image{Tenant: "acme", Hash: session.ImageHash([]byte(data)), MediaType: "image/png",
		Size: int64(len(data)), Data: []byte(data), CreatedAt: at(1)}
}

// noImageLimit is a maxTenantBytes no test reaches.
const noImageLimit = 1 << 30

func mustPutImage(tb testing.TB, st ImageStore, sessionID string, img session.Image) {
	tb.Helper()
	require.NoError(tb, st.PutImage(tb.Context(), sessionID, img, noImageLimit), "put image")
}

func mustGetImage(tb testing.TB, st ImageStore, sessionID, hash string) session.Image {
	tb.Helper()
	img, err := st.GetImage(tb.Context(), sessionID, hash)
	require.NoError(tb, err, "get image")
	img.CreatedAt = utc(img.CreatedAt)
	return img
}

func requireUsage(t *testing.T, st ImageStore, tenant string, want session.ImageUsage) {
	t.Helper()
	got, err := st.ImageUsage(t.Context(), tenant)
	require.NoError(t, err)
	assert.Equal(t, want, got, "usage of tenant %s", tenant)
}

func requireNoImage(t *testing.T, st ImageStore, sessionID, hash string) {
	t.Helper()
	_, err := st.GetImage(t.Context(), sessionID, hash)
	requireNotFound(t, err, "image_not_found")
}

func testImageRoundTrip(t *testing.T, st ImageStore) {
	s := mustCreateSession(t, st)
	img := newImage("\x89PNG\r\n\x1a\n\x00\xff binary")
	mustPutImage(t, st, s.ID, img)
	img.CreatedAt = utc(img.CreatedAt)
	assert.Equal(t, img, mustGetImage(t, st, s.ID, img.Hash))
	requireUsage(t, st, "acme", session.ImageUsage{Images: 1, Bytes: img.Size})
}

func testImageOncePerTenant(t *testing.T, st ImageStore) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	other := mustCreateSession(t, st, func(s *session.Session) { s.Tenant = "globex" })
	img := newImage("same bytes")
	mustPutImage(t, st, a.ID, img)
	mustPutImage(t, st, a.ID, img) // the same message sent twice
	mustPutImage(t, st, b.ID, img)
	theirs := img
	theirs.Tenant = "globex"
	mustPutImage(t, st, other.ID, theirs)
	requireUsage(t, st, "acme", session.ImageUsage{Images: 1, Bytes: img.Size})
	requireUsage(t, st, "globex", session.ImageUsage{Images: 1, Bytes: img.Size})
	assert.Equal(t, "globex", mustGetImage(t, st, other.ID, img.Hash).Tenant)
}

func testImageNotReferred(t *testing.T, st ImageStore) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	img := newImage("a's picture")
	mustPutImage(t, st, a.ID, img)
	requireNoImage(t, st, b.ID, img.Hash)
	requireNoImage(t, st, a.ID, session.ImageHash([]byte("never stored")))
}

func testImageSessionMissing(t *testing.T, st ImageStore) {
	err := st.PutImage(t.Context(), newID(), newImage("x"), noImageLimit)
	requireNotFound(t, err, "session_not_found")
	theirs := mustCreateSession(t, st, func(s *session.Session) { s.Tenant = "globex" })
	err = st.PutImage(t.Context(), theirs.ID, newImage("x"), noImageLimit) // an acme image
	requireNotFound(t, err, "session_not_found")
	requireUsage(t, st, "acme", session.ImageUsage{})
	requireUsage(t, st, "globex", session.ImageUsage{})
}

func testImageQuota(t *testing.T, st ImageStore) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	first, second := newImage("0123456789"), newImage("abcdefghij")
	require.NoError(t, st.PutImage(t.Context(), a.ID, first, 15))
	err := st.PutImage(t.Context(), a.ID, second, 15)
	requireErr(t, err, errdefs.ErrExhausted, "image_quota_exceeded")
	requireNoImage(t, st, a.ID, second.Hash)
	// Bytes the tenant keeps already cost nothing, whatever the bound.
	require.NoError(t, st.PutImage(t.Context(), b.ID, first, 15))
	require.NoError(t, st.PutImage(t.Context(), b.ID, second, 20))
	requireUsage(t, st, "acme", session.ImageUsage{Images: 2, Bytes: 20})
}

func testImageList(t *testing.T, st ImageStore) {
	s := mustCreateSession(t, st)
	got, err := st.ListImages(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Empty(t, got, "a session without images")
	var want []session.Image
	for _, data := range []string{"one", "two", "three"} {
		img := newImage(data)
		mustPutImage(t, st, s.ID, img)
		img.Data, img.CreatedAt = nil, utc(img.CreatedAt)
		want = append(want, img)
	}
	slices.SortFunc(want, func(a, b session.Image) int { return strings.Compare(a.Hash, b.Hash) })
	got, err = st.ListImages(t.Context(), s.ID)
	require.NoError(t, err)
	for i := range got {
		got[i].CreatedAt = utc(got[i].CreatedAt)
	}
	assert.Equal(t, want, got)
}

func testImageLink(t *testing.T, st ImageStore) {
	parent, fork := mustCreateSession(t, st), mustCreateSession(t, st)
	img := newImage("shared")
	mustPutImage(t, st, parent.ID, img)
	require.NoError(t, st.LinkImages(t.Context(), parent.ID, fork.ID))
	require.NoError(t, st.ReleaseImages(t.Context(), parent.ID))
	assert.Equal(t, img.Hash, mustGetImage(t, st, fork.ID, img.Hash).Hash, "the fork keeps the image")
	requireNoImage(t, st, parent.ID, img.Hash)
	requireUsage(t, st, "acme", session.ImageUsage{Images: 1, Bytes: img.Size})
	err := st.LinkImages(t.Context(), parent.ID, newID())
	requireNotFound(t, err, "session_not_found")
}

func testImageRelease(t *testing.T, st ImageStore) {
	a, b := mustCreateSession(t, st), mustCreateSession(t, st)
	shared, own := newImage("shared"), newImage("a's own")
	mustPutImage(t, st, a.ID, shared)
	mustPutImage(t, st, a.ID, own)
	mustPutImage(t, st, b.ID, shared)
	require.NoError(t, st.DeleteSession(t.Context(), a.ID))
	forgetLease(st, a.ID)
	require.NoError(t, st.ReleaseImages(t.Context(), a.ID))
	requireUsage(t, st, "acme", session.ImageUsage{Images: 1, Bytes: shared.Size})
	mustGetImage(t, st, b.ID, shared.Hash)
	require.NoError(t, st.ReleaseImages(t.Context(), a.ID), "releasing twice")
	require.NoError(t, st.ReleaseImages(t.Context(), b.ID))
	requireUsage(t, st, "acme", session.ImageUsage{})
	requireNoImage(t, st, b.ID, shared.Hash)
	// A new session may keep the same bytes again.
	c := mustCreateSession(t, st)
	mustPutImage(t, st, c.ID, shared)
	requireUsage(t, st, "acme", session.ImageUsage{Images: 1, Bytes: shared.Size})
}

func testImageAliasing(t *testing.T, st ImageStore) {
	s := mustCreateSession(t, st)
	img := newImage("original")
	data := img.Data
	mustPutImage(t, st, s.ID, img)
	data[0] = 'X' // the caller's buffer, changed after the put
	got := mustGetImage(t, st, s.ID, img.Hash)
	assert.Equal(t, "original", string(got.Data))
	got.Data[0] = 'Y'
	assert.True(t, bytes.Equal([]byte("original"), mustGetImage(t, st, s.ID, img.Hash).Data))
}

func testImageRefsKept(t *testing.T, st ImageStore) {
	s := mustCreateSession(t, st)
	refs := []session.ImageRef{
		{Hash: session.ImageHash([]byte("x")), MediaType: "image/png"},
		{URL: "https://example.com/cat.jpg"},
		{URL: "https://example.com/dog", MediaType: "image/webp"},
	}
	m := newMessage(s.ID, "what are these?")
	m.Images = refs
	require.NoError(t, appendMessages(t.Context(), st, m))
	got := mustListMessages(t, st, s.ID, 0, 0)
	require.Len(t, got, 1)
	assert.Equal(t, refs, got[0].Images)
	assert.Nil(t, mustAppendMessages(t, st, s.ID, 1)[0].Images, "a message without images")
	r := mustCreateRun(t, st, s.ID, func(r *session.Run) { r.Images, r.Source = refs, session.RunSourceSchedule })
	stored := mustGetRun(t, st, s.ID, r.ID)
	assert.Equal(t, refs, stored.Images)
	assert.Equal(t, session.RunSourceSchedule, stored.Source)
}
