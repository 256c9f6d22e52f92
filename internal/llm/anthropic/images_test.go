package anthropic_test

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
// Messages API's format: image blocks with a base64 or url source, before
// the text of their message, and merged with a user turn they join.
func TestClient_Stream_Images(t *testing.T) {
	png := imagestest.PNG()
	s := llmtest.NewServer(t, textReply("A red dot.", 1, 1))
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "What is in these?", Images: []llm.Image{
			{MediaType: "image/png", Data: png},
			{URL: "https://example.com/cat.jpg"},
		}},
		{Role: llm.RoleUser, Images: []llm.Image{{MediaType: "image/png", Data: png}}}, // no text: images alone
	}}
	got, err := llmtest.Collect(t, mustClient(t, s, nil), req)
	require.NoError(t, err)
	assert.Equal(t, "A red dot.", got.Text)

	data := base64.StdEncoding.EncodeToString(png)
	assert.JSONEq(t, `[{"role": "user", "content": [
		{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "`+data+`"}},
		{"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
		{"type": "text", "text": "What is in these?"},
		{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "`+data+`"}}
	]}]`, s.Requests()[0].Member(t, "messages"))
}
