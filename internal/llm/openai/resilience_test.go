package openai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// ok is a complete, successful stream.
var ok = stream(roleChunk(), textChunk("Hello"), finishChunk("stop"), usageChunk(3, 1), done)

// TestClient_Stream_Failures covers what is retried and what the error
// says. Retries happen only before output; the message names the provider,
// the status and the API's message, never the key or a raw body.
func TestClient_Stream_Failures(t *testing.T) {
	unauthorized := `{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	tests := []struct {
		name         string
		replies      []reply
		opts         map[string]any
		wantRequests int
		wantText     string
		wantErr      string // "" for success
		wantRetry    bool   // the error is retryable (what the kernel would see after retries)
	}{
		{name: "500 then success", replies: []reply{status(500, nil, `{"error":{"message":"The server had an error","type":"server_error"}}`), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "503 every time gives up after max_retries", opts: map[string]any{"max_retries": 2},
			replies:      []reply{status(503, nil, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`)},
			wantRequests: 3, wantErr: "openai: 503 Service Unavailable: The engine is currently overloaded, please try again later", wantRetry: true},
		{name: "connection dropped before output, then success", replies: []reply{cut(roleChunk()), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "error event before output, then success",
			replies:      []reply{stream(`{"error":{"message":"Worker overloaded","type":"server_error","code":503}}`), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "401 is not retried and hides the key", replies: []reply{status(401, nil, unauthorized)},
			wantRequests: 1, wantErr: "openai: 401 Unauthorized: Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys."},
		{name: "400 is not retried", replies: []reply{status(400, nil, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":null}}`)},
			wantRequests: 1, wantErr: "openai: 400 Bad Request: Invalid value for 'temperature'"},
		{name: "403 is not retried", replies: []reply{status(403, nil, `{"error":{"message":"Country not supported","type":"request_forbidden"}}`)},
			wantRequests: 1, wantErr: "openai: 403 Forbidden: Country not supported"},
		{name: "404 from Ollama is not retried", replies: []reply{status(404, nil, `{"error":"model \"llama9\" not found, try pulling it first"}`)},
			wantRequests: 1, wantErr: `openai: 404 Not Found: model "llama9" not found, try pulling it first`},
		{name: "vLLM error body", replies: []reply{status(400, nil, `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`)},
			wantRequests: 1, wantErr: "openai: 400 Bad Request: max_tokens is too large"},
		{name: "a non-JSON body is not shown", opts: map[string]any{"max_retries": 0},
			replies:      []reply{status(502, map[string]string{"Content-Type": "text/html"}, "<html><body>nginx bad gateway internal-host-7</body></html>")},
			wantRequests: 1, wantErr: "openai: 502 Bad Gateway", wantRetry: true},
		{name: "dropped mid-stream fails, no retry after output",
			replies:      []reply{cut(roleChunk(), textChunk("Hel")), ok},
			wantRequests: 1, wantText: "Hel", wantErr: "openai: connection failed: unexpected EOF", wantRetry: true},
		{name: "ended without finish_reason fails",
			replies:      []reply{stream(roleChunk(), textChunk("Hel")), ok},
			wantRequests: 1, wantText: "Hel", wantErr: "openai: stream ended before the response was complete", wantRetry: true},
		{name: "error event after output fails",
			replies:      []reply{stream(roleChunk(), textChunk("Hel"), `{"error":{"message":"Worker died","type":"server_error","code":500}}`), ok},
			wantRequests: 1, wantText: "Hel", wantErr: "openai: 500 Internal Server Error: Worker died", wantRetry: true},
		{name: "malformed chunk", replies: []reply{stream(roleChunk(), `{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"x"}`), ok},
			wantRequests: 1, wantErr: "openai: malformed response: unexpected end of JSON input"},
		{name: "content filter", replies: []reply{stream(roleChunk(), textChunk("I"), finishChunk("content_filter"), done)},
			wantRequests: 1, wantText: "I", wantErr: "openai: the response was stopped by the content filter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.replies...)
			got, err := collect(t, mustClient(t, f, tt.opts), hello)
			assert.Len(t, f.requests(), tt.wantRequests, "requests")
			assert.Equal(t, tt.wantText, got.text, "text is emitted once, never repeated")
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			assert.NotContains(t, err.Error(), testKey)
			assert.Equal(t, tt.wantRetry, llm.Retryable(err))
			assert.ErrorIs(t, err, errdefs.ErrUpstream)
		})
	}
}

// TestClient_Stream_RetryAfter: a 429 is retried after the wait the server
// asked for, in seconds (Retry-After) or milliseconds (retry-after-ms).
func TestClient_Stream_RetryAfter(t *testing.T) {
	limited := `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	tests := []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"Retry-After seconds", map[string]string{"Retry-After": "1"}, time.Second},
		{"retry-after-ms", map[string]string{"retry-after-ms": "300", "Retry-After": "1"}, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, status(http.StatusTooManyRequests, tt.headers, limited), ok)
			got, err := collect(t, mustClient(t, f, nil), hello)
			require.NoError(t, err)
			assert.Equal(t, "Hello", got.text)
			reqs := f.requests()
			require.Len(t, reqs, 2)
			waited := reqs[1].at.Sub(reqs[0].at)
			assert.GreaterOrEqual(t, waited, tt.want-50*time.Millisecond, "waited as asked")
			assert.Less(t, waited, tt.want+time.Second, "and not much longer")
		})
	}
	t.Run("after retries the error names status and message", func(t *testing.T) {
		f := newFake(t, status(http.StatusTooManyRequests, map[string]string{"retry-after-ms": "10"}, limited))
		_, err := collect(t, mustClient(t, f, map[string]any{"max_retries": 1}), hello)
		require.EqualError(t, err, "openai: 429 Too Many Requests: Rate limit reached for gpt-4o-mini")
		assert.Len(t, f.requests(), 2)
	})
}

// slowStream streams a token every 20ms until the client leaves, then
// closes closed.
func slowStream(closed chan<- struct{}) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		defer close(closed)
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, roleChunk())
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				writeEvent(w, textChunk("tok "))
			}
		}
	}
}

// TestClient_Stream_Cancel: cancelling ctx stops the stream at once; the
// server sees the connection close.
func TestClient_Stream_Cancel(t *testing.T) {
	closed := make(chan struct{})
	f := newFake(t, slowStream(closed))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tokens := 0
	start := make(chan time.Time, 1)
	err := mustClient(t, f, nil).Stream(ctx, hello, func(c llm.Chunk) error {
		if tokens++; tokens == 2 {
			start <- time.Now()
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(<-start), 500*time.Millisecond, "Stream returns promptly")
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the server did not see the connection close")
	}
	assert.Len(t, f.requests(), 1)
}

// TestClient_Stream_EmitError: when emit fails, Stream returns its error
// unchanged, does not retry, and closes the connection.
func TestClient_Stream_EmitError(t *testing.T) {
	closed := make(chan struct{})
	f := newFake(t, slowStream(closed))
	stop := errors.New("subscriber gone")
	err := mustClient(t, f, nil).Stream(t.Context(), hello, func(llm.Chunk) error { return stop })
	require.Same(t, stop, err)
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the server did not see the connection close")
	}
	assert.Len(t, f.requests(), 1)
}

// TestClient_Stream_Timeout: an attempt that gets no response within the
// timeout option is abandoned and retried, then the call fails saying so.
func TestClient_Stream_Timeout(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	f := newFake(t, hang)
	start := time.Now()
	_, err := collect(t, mustClient(t, f, map[string]any{"timeout": "200ms", "max_retries": 1}), hello)
	require.EqualError(t, err, "openai: no complete response within 200ms")
	assert.Len(t, f.requests(), 2)
	assert.Less(t, time.Since(start), 3*time.Second)
}
