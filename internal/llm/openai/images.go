package openai

import (
	"encoding/base64"

	"github.com/kerneld/kerneld/internal/llm"
)

// The content parts of a user message that carries images, as the Chat
// Completions API names them (ChatCompletionContentPartText and
// ChatCompletionContentPartImage in OpenAI's SDKs).
type (
	contentPart struct {
		Type     string    `json:"type"` // "text" or "image_url"
		Text     *string   `json:"text,omitempty"`
		ImageURL *imageURL `json:"image_url,omitempty"`
	}
	imageURL struct {
		// URL is the image's address, or its bytes as a data URL.
		URL string `json:"url"`
	}
)

// userMessage maps a user message: its text alone as a string, which every
// OpenAI-compatible server accepts, or, with images, a list of parts: the
// text first (left out when blank), then each image in order.
func userMessage(m *llm.Message) chatMessage {
	if len(m.Images) == 0 {
		return chatMessage{Role: "user", Content: &m.Content}
	}
	parts := make([]contentPart, 0, len(m.Images)+1)
	if m.Content != "" {
		parts = append(parts, contentPart{Type: "text", Text: &m.Content})
	}
	for _, img := range m.Images {
		parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: imageAddress(img)}})
	}
	return chatMessage{Role: "user", Content: parts}
}

// imageAddress returns img's URL, or its bytes as a base64 data URL, the
// form the API takes for an image sent inline.
func imageAddress(img llm.Image) string {
	if img.URL != "" {
		return img.URL
	}
	return "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}
