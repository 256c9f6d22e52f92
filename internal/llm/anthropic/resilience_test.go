package anthropic_test

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
var ok = textReply("Hello", 3, 1)

// TestClient_Stream_Failures covers what is retried and what the error
// says. Retries happen only before output; the message names the provider,
// the status and the API's message, never the key or a raw body.
func TestClient_Stream_Failures(t *testing.T) {
	tests := []struct {
		name         string
		replies      []reply
		opts         map[string]any
		wantRequests int
		wantText     string
		wantErr      string // "" for success
		wantRetry    bool
	}{
		{name: "529 overloaded then success", replies: []reply{status(529, nil, apiError("overloaded_error", "Overloaded")), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "500 then success", replies: []reply{status(500, nil, apiError("api_error", "Internal server error")), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "overloaded error event before output, then success",
			replies:      []reply{stream(messageStart(3), ping, apiError("overloaded_error", "Overloaded")), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "connection dropped before output, then success", replies: []reply{cut(messageStart(3), ping), ok},
			wantRequests: 2, wantText: "Hello"},
		{name: "500 every time gives up after max_retries", opts: map[string]any{"max_retries": 2},
			replies:      []reply{status(500, nil, apiError("api_error", "Internal server error"))},
			wantRequests: 3, wantErr: "anthropic: 500 Internal Server Error: Internal server error", wantRetry: true},
		{name: "401 is not retried and hides the key",
			replies:      []reply{status(401, nil, apiError("authentication_error", "invalid x-api-key "+testKey))},
			wantRequests: 1, wantErr: "anthropic: 401 Unauthorized: invalid x-api-key [redacted]"},
		{name: "400 is not retried", replies: []reply{status(400, nil, apiError("invalid_request_error", "max_tokens: Field required"))},
			wantRequests: 1, wantErr: "anthropic: 400 Bad Request: max_tokens: Field required"},
		{name: "403 is not retried", replies: []reply{status(403, nil, apiError("permission_error", "Your API key does not have permission to use the specified resource."))},
			wantRequests: 1, wantErr: "anthropic: 403 Forbidden: Your API key does not have permission to use the specified resource."},
		{name: "404 is not retried", replies: []reply{status(404, nil, apiError("not_found_error", "model: claude-9"))},
			wantRequests: 1, wantErr: "anthropic: 404 Not Found: model: claude-9"},
		{name: "a non-JSON body is not shown", opts: map[string]any{"max_retries": 0},
			replies:      []reply{status(502, map[string]string{"Content-Type": "text/html"}, "<html>bad gateway internal-host-7</html>")},
			wantRequests: 1, wantErr: "anthropic: 502 Bad Gateway", wantRetry: true},
		{name: "dropped mid-stream fails, no retry after output",
			replies:      []reply{cut(messageStart(3), textStart(0), textDelta(0, "Hel")), ok},
			wantRequests: 1, wantText: "Hel", wantErr: "anthropic: connection failed: unexpected EOF", wantRetry: true},
		{name: "ended without message_stop fails",
			replies:      []reply{stream(messageStart(3), textStart(0), textDelta(0, "Hel"), blockStop(0)), ok},
			wantRequests: 1, wantText: "Hel", wantErr: "anthropic: stream ended before the response was complete", wantRetry: true},
		{name: "error event after output fails",
			replies:      []reply{stream(messageStart(3), textStart(0), textDelta(0, "Hel"), apiError("overloaded_error", "Overloaded")), ok},
			wantRequests: 1, wantText: "Hel", wantErr: "anthropic: 529 Overloaded: Overloaded", wantRetry: true},
		{name: "malformed event", replies: []reply{stream(messageStart(3), `{"type":"content_block_start","index":0,`), ok},
			wantRequests: 1, wantErr: "anthropic: malformed response: unexpected end of JSON input"},
		{name: "refusal", replies: []reply{stream(messageStart(3), textStart(0), textDelta(0, "I"), blockStop(0), messageDelta("refusal", 1), messageStop)},
			wantRequests: 1, wantText: "I", wantErr: "anthropic: the model declined to answer (stop_reason refusal)"},
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

// TestClient_Stream_RetryAfter: a 429 is retried after the Retry-After the
// server sent.
func TestClient_Stream_RetryAfter(t *testing.T) {
	limited := apiError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
	f := newFake(t, status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"}, limited), ok)
	got, err := collect(t, mustClient(t, f, nil), hello)
	require.NoError(t, err)
	assert.Equal(t, "Hello", got.text)
	reqs := f.requests()
	require.Len(t, reqs, 2)
	waited := reqs[1].at.Sub(reqs[0].at)
	assert.GreaterOrEqual(t, waited, 950*time.Millisecond, "waited as asked")
	assert.Less(t, waited, 2*time.Second, "and not much longer")

	f = newFake(t, status(http.StatusTooManyRequests, map[string]string{"retry-after": "0.01"}, limited))
	_, err = collect(t, mustClient(t, f, map[string]any{"max_retries": 1}), hello)
	require.EqualError(t, err, "anthropic: 429 Too Many Requests: Number of request tokens has exceeded your per-minute rate limit")
	assert.Len(t, f.requests(), 2)
}

// slowStream streams a token every 20ms until the client leaves, then
// closes closed.
func slowStream(closed chan<- struct{}) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		defer close(closed)
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, messageStart(3))
		writeEvent(w, textStart(0))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				writeEvent(w, textDelta(0, "tok "))
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
	err := mustClient(t, f, nil).Stream(ctx, hello, func(llm.Chunk) error {
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
	require.EqualError(t, err, "anthropic: no complete response within 200ms")
	assert.Len(t, f.requests(), 2)
	assert.Less(t, time.Since(start), 3*time.Second)
}
