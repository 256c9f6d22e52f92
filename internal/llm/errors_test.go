package llm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

func TestAPIError_Error(t *testing.T) {
	tests := []struct {
		name string
		err  *llm.APIError
		want string
	}{
		{"status and message", &llm.APIError{Provider: "openai", StatusCode: 429, Status: "Too Many Requests", Message: "Rate limit reached"},
			"openai: 429 Too Many Requests: Rate limit reached"},
		{"no message", &llm.APIError{Provider: "anthropic", StatusCode: 500, Status: "Internal Server Error"},
			"anthropic: 500 Internal Server Error"},
		{"no status", &llm.APIError{Provider: "openai", Message: "model overloaded"}, "openai: error: model overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.ErrorIs(t, tt.err, errdefs.ErrUpstream)
		})
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&llm.APIError{StatusCode: 408}, true},
		{&llm.APIError{StatusCode: 429}, true},
		{&llm.APIError{StatusCode: 500}, true},
		{&llm.APIError{StatusCode: 529}, true},
		{&llm.APIError{StatusCode: 400}, false},
		{&llm.APIError{StatusCode: 401}, false},
		{&llm.APIError{StatusCode: 403}, false},
		{&llm.APIError{StatusCode: 404}, false},
		{&llm.APIError{}, false},
		{fmt.Errorf("wrapped: %w", &llm.ConnectionError{Provider: "p", Err: llm.ErrIncomplete}), true},
		{errors.New("other"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, llm.Retryable(tt.err), "Retryable(%v)", tt.err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers map[string]string
		want    time.Duration
		ok      bool
	}{
		{"seconds", map[string]string{"retry-after": "2"}, 2 * time.Second, true},
		{"fractional seconds", map[string]string{"retry-after": "0.5"}, 500 * time.Millisecond, true},
		{"HTTP date", map[string]string{"retry-after": "Sat, 21 Nov 2026 12:00:07 GMT"}, 7 * time.Second, true},
		{"HTTP date in the past", map[string]string{"retry-after": "Sat, 21 Nov 2026 11:00:00 GMT"}, 0, true},
		{"milliseconds win", map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, 1500 * time.Millisecond, true},
		{"bad milliseconds fall back", map[string]string{"retry-after-ms": "soon", "retry-after": "3"}, 3 * time.Second, true},
		{"none", nil, 0, false},
		{"garbage", map[string]string{"retry-after": "later"}, 0, false},
		{"negative", map[string]string{"retry-after": "-1"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := llm.RetryAfter(func(k string) string { return tt.headers[strings.ToLower(k)] }, now)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSafeMessage(t *testing.T) {
	const key = "sk-live-1234567890"
	got := llm.SafeMessage("Incorrect API key provided:\n  "+key+".  Check it.", key)
	assert.Equal(t, "Incorrect API key provided: [redacted]. Check it.", got)
	long := llm.SafeMessage(strings.Repeat("é", 1000))
	assert.Equal(t, 301, len([]rune(long)), "cut to 300 runes plus an ellipsis")
}

func TestTransportError(t *testing.T) {
	refused := &url.Error{Op: "Post", URL: "http://user@10.0.0.1/v1/chat/completions",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}}
	syntaxErr := json.Unmarshal([]byte("{oops"), new(any))
	tests := []struct {
		name      string
		err       error
		want      string
		retryable bool
	}{
		{"connection refused", refused, "openai: connection failed: dial tcp: connect: connection refused", true},
		{"cut short", io.ErrUnexpectedEOF, "openai: connection failed: unexpected EOF", true},
		{"malformed JSON", syntaxErr, "openai: malformed response: invalid character 'o' looking for beginning of object key string", false},
		{"anything else hides its text", errors.New(`received {"secret":"body"}`), "openai: request failed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := llm.TransportError("openai", tt.err)
			assert.EqualError(t, got, tt.want)
			assert.Equal(t, tt.retryable, llm.Retryable(got))
			assert.NotContains(t, got.Error(), "10.0.0.1", "the URL is not repeated")
		})
	}
}
