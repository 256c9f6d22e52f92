package anthropic_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

// TestClient_Stream_Failures covers what is retried and what the error
// says. Retries happen only before output; the message names the provider,
// the status and the API's message, never the key or a raw body.
func TestClient_Stream_Failures(t *testing.T) {
	adapter.CheckFailures(t, []llmtest.Failure{
		{Name: "529 overloaded then success", Replies: []llmtest.Reply{llmtest.Status(529, nil, apiError("overloaded_error", "Overloaded")), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "500 then success", Replies: []llmtest.Reply{llmtest.Status(500, nil, apiError("api_error", "Internal server error")), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "overloaded error event before output, then success",
			Replies:      []llmtest.Reply{stream(messageStart(3), ping, apiError("overloaded_error", "Overloaded")), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "connection dropped before output, then success", Replies: []llmtest.Reply{llmtest.Cut(stream(messageStart(3), ping)), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "500 every time gives up after max_retries", Opts: map[string]any{"max_retries": 2},
			Replies:      []llmtest.Reply{llmtest.Status(500, nil, apiError("api_error", "Internal server error"))},
			WantRequests: 3, WantErr: "anthropic: 500 Internal Server Error: Internal server error", WantRetry: true},
		{Name: "401 is not retried and hides the key",
			Replies:      []llmtest.Reply{llmtest.Status(401, nil, apiError("authentication_error", "invalid x-api-key "+testKey))},
			WantRequests: 1, WantErr: "anthropic: 401 Unauthorized: invalid x-api-key [redacted]"},
		{Name: "400 is not retried", Replies: []llmtest.Reply{llmtest.Status(400, nil, apiError("invalid_request_error", "max_tokens: Field required"))},
			WantRequests: 1, WantErr: "anthropic: 400 Bad Request: max_tokens: Field required"},
		{Name: "403 is not retried", Replies: []llmtest.Reply{llmtest.Status(403, nil, apiError("permission_error", "Your API key does not have permission to use the specified resource."))},
			WantRequests: 1, WantErr: "anthropic: 403 Forbidden: Your API key does not have permission to use the specified resource."},
		{Name: "404 is not retried", Replies: []llmtest.Reply{llmtest.Status(404, nil, apiError("not_found_error", "model: claude-9"))},
			WantRequests: 1, WantErr: "anthropic: 404 Not Found: model: claude-9"},
		{Name: "a non-JSON body is not shown", Opts: map[string]any{"max_retries": 0},
			Replies:      []llmtest.Reply{llmtest.Status(502, map[string]string{"Content-Type": "text/html"}, "<html>bad gateway internal-host-7</html>")},
			WantRequests: 1, WantErr: "anthropic: 502 Bad Gateway", WantRetry: true},
		{Name: "dropped mid-stream fails, no retry after output",
			Replies:      []llmtest.Reply{llmtest.Cut(stream(messageStart(3), textStart(0), textDelta(0, "Hel"))), ok},
			WantRequests: 1, WantText: "Hel", WantErr: "anthropic: connection failed: unexpected EOF", WantRetry: true},
		{Name: "ended without message_stop fails",
			Replies:      []llmtest.Reply{stream(messageStart(3), textStart(0), textDelta(0, "Hel"), blockStop(0)), ok},
			WantRequests: 1, WantText: "Hel", WantErr: "anthropic: stream ended before the response was complete", WantRetry: true},
		{Name: "error event after output fails",
			Replies:      []llmtest.Reply{stream(messageStart(3), textStart(0), textDelta(0, "Hel"), apiError("overloaded_error", "Overloaded")), ok},
			WantRequests: 1, WantText: "Hel", WantErr: "anthropic: 529 Overloaded: Overloaded", WantRetry: true},
		{Name: "malformed event", Replies: []llmtest.Reply{stream(messageStart(3), `{"type":"content_block_start","index":0,`), ok},
			WantRequests: 1, WantErr: "anthropic: malformed response: unexpected end of JSON input"},
		{Name: "200 with a JSON error is retried as its type says",
			Replies:      []llmtest.Reply{llmtest.Status(200, nil, apiError("overloaded_error", "Overloaded")), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "200 with a JSON error shows its message",
			Replies:      []llmtest.Reply{llmtest.Status(200, nil, apiError("invalid_request_error", "messages: at least one message is required")), ok},
			WantRequests: 1, WantErr: "anthropic: 400 Bad Request: messages: at least one message is required"},
		{Name: "a whole message instead of a stream is explained",
			Replies: []llmtest.Reply{llmtest.Status(200, nil, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hello"}],`+
				`"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`), ok},
			WantRequests: 1, WantErr: `anthropic: the server answered 200 with "application/json" instead of an event stream; ` +
				"check that its base URL is the Messages API (https://api.anthropic.com or a proxy of it)"},
		{Name: "refusal", Replies: []llmtest.Reply{stream(messageStart(3), textStart(0), textDelta(0, "I"), blockStop(0), messageDelta("refusal", 1), messageStop)},
			WantRequests: 1, WantText: "I", WantErr: "anthropic: the model declined to answer (stop_reason refusal)"},
	})
}

// TestClient_Stream_RetryAfter: a 429 is retried after the Retry-After the
// server sent; once retries run out, the error names the status and the
// message.
func TestClient_Stream_RetryAfter(t *testing.T) {
	limited := apiError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
	adapter.CheckRetryAfter(t, llmtest.Status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"}, limited), time.Second)
	adapter.CheckFailures(t, []llmtest.Failure{{
		Name:         "after retries the error names status and message",
		Replies:      []llmtest.Reply{llmtest.Status(http.StatusTooManyRequests, map[string]string{"retry-after": "0.01"}, limited)},
		Opts:         map[string]any{"max_retries": 1},
		WantRequests: 2, WantErr: "anthropic: 429 Too Many Requests: Number of request tokens has exceeded your per-minute rate limit", WantRetry: true,
	}})
}

// TestClient_Stream_StreamTimeout: the timeout bounds a stream that never
// ends, not only the wait for its headers.
func TestClient_Stream_StreamTimeout(t *testing.T) { adapter.CheckStreamTimeout(t) }

// TestClient_Stream_Cancel: cancelling ctx stops the stream at once; the
// server sees the connection close.
func TestClient_Stream_Cancel(t *testing.T) { adapter.CheckCancel(t) }

// TestClient_Stream_EmitError: when emit fails, Stream returns its error
// unchanged, does not retry, and closes the connection.
func TestClient_Stream_EmitError(t *testing.T) { adapter.CheckEmitError(t) }

// TestClient_Stream_Timeout: an attempt that gets no response within the
// timeout option is abandoned and retried, then the call fails saying so.
func TestClient_Stream_Timeout(t *testing.T) { adapter.CheckTimeout(t) }
