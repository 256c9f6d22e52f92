package transfer_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/transfer"
)

// TestExport_CarriesARunsImages: a session whose run took an image moves
// to another store with the image's bytes and the user message's
// reference, so the model of a run there is sent the same image.
func TestExport_CarriesARunsImages(t *testing.T) {
	src := memory.New()
	k := kerneltest.New(t, kerneltest.Options{Store: src})
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo"})
	require.NoError(t, err)
	png := imagestest.PNG()
	kerneltest.RunInSession(t, k.Kernel, s.ID, kernel.RunRequest{Input: "look",
		Images: []images.Input{{MediaType: "image/png", Data: png}, {URL: "https://example.com/a.gif"}}})

	dst := openSQLite(t)
	_, err = transfer.Import(t.Context(), dst, bytes.NewReader(export(t, src)), transfer.ImportOptions{})
	require.NoError(t, err)
	msgs, err := dst.RecentMessages(t.Context(), s.ID, 10)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	refs := []session.ImageRef{{Hash: session.ImageHash(png), MediaType: "image/png"}, {URL: "https://example.com/a.gif"}}
	assert.Equal(t, refs, msgs[0].Images)
	loaded, err := images.New(dst.(images.Store), images.Limits{}, nil).Load(t.Context(), s.ID, refs)
	require.NoError(t, err)
	assert.Equal(t, png, loaded[0].Data, "the bytes moved with the session")
}
