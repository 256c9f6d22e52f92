// Package imagestest gives tests real images of every media type kerneld
// takes, small enough to write into a request. It must not be imported
// outside tests.
package imagestest

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// dot is a red square of 2×2 pixels.
func dot() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for x := range 2 {
		for y := range 2 {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	return img
}

// PNG returns a PNG image.
func PNG() []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, dot()) // writing to memory cannot fail
	return b.Bytes()
}

// JPEG returns a JPEG image.
func JPEG() []byte {
	var b bytes.Buffer
	_ = jpeg.Encode(&b, dot(), nil)
	return b.Bytes()
}

// GIF returns a GIF image.
func GIF() []byte {
	var b bytes.Buffer
	_ = gif.Encode(&b, dot(), nil)
	return b.Bytes()
}

// WebP returns a lossless WebP image of one pixel (the standard library
// has no WebP encoder; these 26 bytes are the image browsers' WebP
// detection decodes).
func WebP() []byte {
	b, _ := base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
	return b
}

// Base64 returns data as the base64 text a client sends.
func Base64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
