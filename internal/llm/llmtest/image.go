package llmtest

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/stretchr/testify/require"
)

// PNG returns a real PNG image, a red dot of 2×2 pixels, for tests that
// send pictures to a model.
func PNG(tb testing.TB) []byte {
	tb.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for x := range 2 {
		for y := range 2 {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	var b bytes.Buffer
	require.NoError(tb, png.Encode(&b, img))
	return b.Bytes()
}
