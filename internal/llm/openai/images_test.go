package openai_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

// TestClient_Stream_Images checks that images reach the server in the
// Chat Completions format: a user message with images becomes a list of
// text and image_url parts, bytes as a base64 data URL, a URL as it is;
// one without stays a string.
func TestClient_Stream_Images(t *testing.T) {
	png := imagestest.PNG()
	s := llmtest.NewServer(t, stream(roleChunk(), textChunk("A red dot."), finishChunk("stop"), done))
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Hi"},
		{Role: llm.RoleAssistant, Content: "Hello."},
		{Role: llm.RoleUser, Content: "What is in these?", Images: []llm.Image{
			{MediaType: "image/png", Data: png},
			{URL: "https://example.com/cat.jpg"},
		}},
		{Role: llm.RoleUser, Images: []llm.Image{{MediaType: "image/png", Data: png}}}, // no text: images alone
	}}
	got, err := llmtest.Collect(t, mustClient(t, s, nil), req)
	require.NoError(t, err)
	assert.Equal(t, "A red dot.", got.Text)

	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	assert.JSONEq(t, `[
		{"role": "user", "content": "Hi"},
		{"role": "assistant", "content": "Hello."},
		{"role": "user", "content": [
			{"type": "text", "text": "What is in these?"},
			{"type": "image_url", "image_url": {"url": "`+dataURL+`"}},
			{"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}
		]},
		{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "`+dataURL+`"}}]}
	]`, s.Requests()[0].Member(t, "messages"))
}
