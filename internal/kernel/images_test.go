package kernel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// TestRun_Images: an input of images alone runs, its echo is a valid AG-UI
// message without content followed by kerneld.message.images, and its
// user message keeps the references; an Idempotency-Key names the input
// with its images.
func TestRun_Images(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	png := imagestest.PNG()
	req := kernel.RunRequest{Images: []images.Input{{MediaType: "image/png", Data: png}}, IdempotencyKey: "img-1"}
	run, replayed := startRun(t, k.Kernel, s.ID, req)
	require.False(t, replayed)
	waitRun(t, k.Kernel, rec, s.ID, run.ID)
	ref := session.ImageRef{Hash: session.ImageHash(png), MediaType: "image/png"}
	assert.Equal(t, []session.ImageRef{ref}, run.Images)

	evs, err := k.Events(t.Context(), s.ID, 0, 1000)
	require.NoError(t, err)
	aguitest.Verify(t, evs)
	assert.Equal(t, []string{"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "CUSTOM"}, kerneltest.Types(evs)[:4])
	assert.JSONEq(t, `"kerneld.message.images"`, kerneltest.Member(t, evs, session.EventCustom, "name"))

	msgs, err := k.Messages(t.Context(), s.ID, kernel.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.NotEmpty(t, msgs.Items)
	assert.Equal(t, session.RoleUser, msgs.Items[0].Role)
	assert.Equal(t, []session.ImageRef{ref}, msgs.Items[0].Images)

	again, replayed := startRun(t, k.Kernel, s.ID, req)
	assert.True(t, replayed, "the same key with the same images is the same run")
	assert.Equal(t, run.ID, again.ID)
	req.Images = []images.Input{{MediaType: "image/gif", Data: imagestest.GIF()}}
	_, _, err = k.Run(t.Context(), s.ID, req)
	assert.Equal(t, errdefs.CodeIdempotencyKeyReused, errdefs.CodeOf(err), "another image is another input")
}

// TestRun_ImagesNotKept: a kernel whose library keeps no images refuses
// an input that carries some, and starts no run.
func TestRun_ImagesNotKept(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{Images: images.New(nil, images.Limits{}, nil)})
	s := mustSession(t, k.Kernel, "echo")
	_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "look", Images: []images.Input{{MediaType: "image/png", Data: imagestest.PNG()}}})
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Equal(t, errdefs.CodeImagesNotKept, errdefs.CodeOf(err))
	runs, err := k.ListRuns(t.Context(), s.ID, kernel.PageRequest{Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, runs.Items)
}

// TestRegenerate_Images: a regenerated run takes the images of the run
// it answers again, and the fork shows them.
func TestRegenerate_Images(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	png := imagestest.PNG()
	run, _ := startRun(t, k.Kernel, s.ID, kernel.RunRequest{Input: "what?", Images: []images.Input{{MediaType: "image/png", Data: png}}})
	waitRun(t, k.Kernel, rec, s.ID, run.ID)

	fork, again, err := k.Regenerate(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, run.Images, again.Images)
	waitRun(t, k.Kernel, rec, fork.ID, again.ID)
	img, err := k.Images.Get(t.Context(), fork.ID, session.ImageHash(png))
	require.NoError(t, err, "the fork refers to the image")
	assert.Equal(t, png, img.Data)
}
