package anthropic

import (
	"encoding/base64"

	"github.com/kerneld/kerneld/internal/llm"
)

// imageBlock is an image in a user message, as the Messages API names it
// (ImageBlockParam in Anthropic's SDKs): its bytes inline (a base64
// source) or a URL the API fetches (a url source).
type (
	imageBlock struct {
		Type   string      `json:"type"` // "image"
		Source imageSource `json:"source"`
	}
	imageSource struct {
		Type      string `json:"type"` // "base64" or "url"
		MediaType string `json:"media_type,omitempty"`
		Data      string `json:"data,omitempty"`
		URL       string `json:"url,omitempty"`
	}
)

// userBlocks maps a user message: its images, in order, then its text.
// Anthropic's guide to vision recommends that order: the model does best
// with the images before the question about them.
func userBlocks(m llm.Message) []contentBlock {
	blocks := make([]contentBlock, 0, len(m.Images)+1)
	for _, img := range m.Images {
		blocks = append(blocks, newImageBlock(img))
	}
	return append(blocks, textBlocks(m.Content)...)
}

func newImageBlock(img llm.Image) imageBlock {
	if img.URL != "" {
		return imageBlock{Type: "image", Source: imageSource{Type: "url", URL: img.URL}}
	}
	return imageBlock{Type: "image", Source: imageSource{
		Type: "base64", MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data),
	}}
}
