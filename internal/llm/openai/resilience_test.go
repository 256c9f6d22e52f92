package openai_test

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
	unauthorized := `{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	adapter.CheckFailures(t, []llmtest.Failure{
		{Name: "500 then success", Replies: []llmtest.Reply{llmtest.Status(500, nil, `{"error":{"message":"The server had an error","type":"server_error"}}`), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "503 every time gives up after max_retries", Opts: map[string]any{"max_retries": 2},
			Replies:      []llmtest.Reply{llmtest.Status(503, nil, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`)},
			WantRequests: 3, WantErr: "openai: 503 Service Unavailable: The engine is currently overloaded, please try again later", WantRetry: true},
		{Name: "connection dropped before output, then success", Replies: []llmtest.Reply{llmtest.Cut(stream(roleChunk())), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "error event before output, then success",
			Replies:      []llmtest.Reply{stream(`{"error":{"message":"Worker overloaded","type":"server_error","code":503}}`), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "401 is not retried and hides the key", Replies: []llmtest.Reply{llmtest.Status(401, nil, unauthorized)},
			WantRequests: 1, WantErr: "openai: 401 Unauthorized: Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys."},
		{Name: "400 is not retried", Replies: []llmtest.Reply{llmtest.Status(400, nil, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":null}}`)},
			WantRequests: 1, WantErr: "openai: 400 Bad Request: Invalid value for 'temperature'"},
		{Name: "403 is not retried", Replies: []llmtest.Reply{llmtest.Status(403, nil, `{"error":{"message":"Country not supported","type":"request_forbidden"}}`)},
			WantRequests: 1, WantErr: "openai: 403 Forbidden: Country not supported"},
		{Name: "404 from Ollama is not retried", Replies: []llmtest.Reply{llmtest.Status(404, nil, `{"error":"model \"llama9\" not found, try pulling it first"}`)},
			WantRequests: 1, WantErr: `openai: 404 Not Found: model "llama9" not found, try pulling it first`},
		{Name: "vLLM error body", Replies: []llmtest.Reply{llmtest.Status(400, nil, `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`)},
			WantRequests: 1, WantErr: "openai: 400 Bad Request: max_tokens is too large"},
		{Name: "a non-JSON body is not shown", Opts: map[string]any{"max_retries": 0},
			Replies:      []llmtest.Reply{llmtest.Status(502, map[string]string{"Content-Type": "text/html"}, "<html><body>nginx bad gateway internal-host-7</body></html>")},
			WantRequests: 1, WantErr: "openai: 502 Bad Gateway", WantRetry: true},
		{Name: "dropped mid-stream fails, no retry after output",
			Replies:      []llmtest.Reply{llmtest.Cut(stream(roleChunk(), textChunk("Hel"))), ok},
			WantRequests: 1, WantText: "Hel", WantErr: "openai: connection failed: unexpected EOF", WantRetry: true},
		{Name: "ended without finish_reason fails",
			Replies:      []llmtest.Reply{stream(roleChunk(), textChunk("Hel")), ok},
			WantRequests: 1, WantText: "Hel", WantErr: "openai: stream ended before the response was complete", WantRetry: true},
		{Name: "error event after output fails",
			Replies:      []llmtest.Reply{stream(roleChunk(), textChunk("Hel"), `{"error":{"message":"Worker died","type":"server_error","code":500}}`), ok},
			WantRequests: 1, WantText: "Hel", WantErr: "openai: 500 Internal Server Error: Worker died", WantRetry: true},
		{Name: "malformed chunk", Replies: []llmtest.Reply{stream(roleChunk(), `{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"x"}`), ok},
			WantRequests: 1, WantErr: "openai: malformed response: unexpected end of JSON input"},
		{Name: "200 with a JSON error is retried as its code says",
			Replies:      []llmtest.Reply{llmtest.Status(200, nil, `{"error":{"message":"Model is loading","code":503}}`), ok},
			WantRequests: 2, WantText: "Hello"},
		{Name: "200 with a JSON error shows its message",
			Replies:      []llmtest.Reply{llmtest.Status(200, nil, `{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}`), ok},
			WantRequests: 1, WantErr: "openai: error: registry.ollama.ai/library/gemma:2b does not support tools"},
		{Name: "a whole completion instead of a stream is explained",
			Replies:      []llmtest.Reply{llmtest.Status(200, nil, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}`), ok},
			WantRequests: 1, WantErr: `openai: the server answered 200 with "application/json" instead of an event stream; ` +
				"check that its base URL is a Chat Completions API that supports streaming"},
		{Name: "a stream labelled otherwise still streams",
			Replies:      []llmtest.Reply{streamAs("text/plain; charset=utf-8", roleChunk(), textChunk("Hello"), finishChunk("stop"), done)},
			WantRequests: 1, WantText: "Hello"},
		{Name: "an event named error",
			Replies:      []llmtest.Reply{named("error", `{"message":"Upstream request timed out"}`), ok},
			WantRequests: 1, WantErr: "openai: error: Upstream request timed out"},
		{Name: "an error event without an object", Replies: []llmtest.Reply{stream(roleChunk(), `{"error":"Model crashed","choices":"none"}`)},
			WantRequests: 1, WantErr: "openai: error: Model crashed"},
		{Name: "content filter", Replies: []llmtest.Reply{stream(roleChunk(), textChunk("I"), finishChunk("content_filter"), done)},
			WantRequests: 1, WantText: "I", WantErr: "openai: the response was stopped by the content filter"},
	})
}

// TestClient_Stream_RetryAfter: a 429 is retried after the wait the server
// asked for, in seconds (Retry-After) or milliseconds (retry-after-ms);
// once retries run out, the error names the status and the message.
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
			adapter.CheckRetryAfter(t, llmtest.Status(http.StatusTooManyRequests, tt.headers, limited), tt.want)
		})
	}
	adapter.CheckFailures(t, []llmtest.Failure{{
		Name:         "after retries the error names status and message",
		Replies:      []llmtest.Reply{llmtest.Status(http.StatusTooManyRequests, map[string]string{"retry-after-ms": "10"}, limited)},
		Opts:         map[string]any{"max_retries": 1},
		WantRequests: 2, WantErr: "openai: 429 Too Many Requests: Rate limit reached for gpt-4o-mini", WantRetry: true,
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
