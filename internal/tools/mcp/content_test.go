package mcp

import (
	"encoding/json"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
)

func TestResultText(t *testing.T) {
	size := int64(7)
	tests := []struct {
		name    string
		res     *mcpsdk.CallToolResult
		want    string
		wantErr string
	}{
		{"Empty", &mcpsdk.CallToolResult{}, "", ""},
		{"TextParts", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: "one"}, &mcpsdk.TextContent{Text: "two"},
		}}, "one\ntwo", ""},
		{"Image", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: "a picture:"},
			&mcpsdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
		}}, "a picture:\n[image: image/png, 1234 bytes]", ""},
		{"Audio", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)},
		}}, "[audio: audio/wav, 10 bytes]", ""},
		{"ResourceLink", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.ResourceLink{Name: "readme", URI: "file:///README.md", Size: &size},
		}}, "[resource link: readme file:///README.md]", ""},
		{"EmbeddedText", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "mem://a", Text: "hello"}},
		}}, "[resource: mem://a]\nhello", ""},
		{"EmbeddedBlob", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "mem://b", MIMEType: "application/gzip", Blob: []byte{1, 2, 3}}},
		}}, "[resource: mem://b, application/gzip, 3 bytes]", ""},
		{"StructuredOnly", &mcpsdk.CallToolResult{StructuredContent: map[string]any{"sum": 3}}, `{"sum":3}`, ""},
		{"StructuredWithText", &mcpsdk.CallToolResult{
			Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: `{"sum": 3}`}},
			StructuredContent: map[string]any{"sum": 3},
		}, `{"sum": 3}`, ""},
		{"IsError", &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: "no such city"},
		}}, "", "no such city"},
		{"IsErrorWithoutText", &mcpsdk.CallToolResult{IsError: true}, "", "the tool reported an error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resultText(tt.res)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestArguments(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    string
		wantErr bool
	}{
		{"Empty", "", "{}", false},
		{"Blank", " \n", "{}", false},
		{"Object", ` {"a": 1} `, `{"a": 1}`, false},
		{"Array", `[1]`, "", true},
		{"String", `"a"`, "", true},
		{"Invalid", `{"a":`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := arguments(json.RawMessage(tt.raw))
			if tt.wantErr {
				require.ErrorIs(t, err, errdefs.ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got))
		})
	}
}

func TestOptions_Backoff(t *testing.T) {
	o := Options{MinBackoff: time.Second, MaxBackoff: 30 * time.Second}
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{5, 16 * time.Second},
		{6, 30 * time.Second},
		{100, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := o.backoff(tt.failures); got != tt.want {
			t.Errorf("backoff(%d) = %v, want %v", tt.failures, got, tt.want)
		}
	}
}

func TestServerConfig_Key(t *testing.T) {
	base := ServerConfig{Name: "a", Command: "srv", Env: map[string]string{"X": "1", "Y": "2"}}
	same := ServerConfig{Name: "a", Command: "srv", Env: map[string]string{"Y": "2", "X": "1"}, CallTimeout: time.Minute}
	assert.Equal(t, base.key(), same.key(), "map order and CallTimeout do not matter")
	for _, other := range []ServerConfig{
		{Name: "b", Command: "srv", Env: base.Env},
		{Name: "a", Command: "srv", Env: map[string]string{"X": "1"}},
		{Name: "a", Command: "srv", Args: []string{"stdio"}, Env: base.Env},
		{Name: "a", URL: "http://x", Env: base.Env},
	} {
		assert.NotEqual(t, base.key(), other.key(), "%+v", other)
	}
}
