package llm_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

const secret = "sk-secret-123"

// mustEndpoint returns an Endpoint of a server that answers every request
// with status, headers and body, and the requests' bodies.
func mustEndpoint(t *testing.T, status int, header map[string]string, body string) (*llm.Endpoint, <-chan []byte) {
	t.Helper()
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return &llm.Endpoint{
		Provider: "test",
		URL:      srv.URL + "/v1/stream",
		Header:   http.Header{"Authorization": {"Bearer " + secret}},
		Secret:   secret,
		ErrorMessage: func(body []byte) string {
			var b struct{ Error string }
			_ = json.Unmarshal(body, &b)
			return b.Error
		},
		StreamError: func(data []byte) error { return errors.New("stream error: " + string(data)) },
		Expected:    "a test API",
	}, got
}

// collect is a handle that keeps each event's data and reports [DONE] as
// the final event.
func collect(into *[]string) func(llm.SSEEvent) (bool, error) {
	return func(ev llm.SSEEvent) (bool, error) {
		*into = append(*into, string(ev.Data))
		return string(ev.Data) == "[DONE]", nil
	}
}

func TestEndpoint_Stream(t *testing.T) {
	sse := map[string]string{"Content-Type": "text/event-stream"}
	tests := []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		want     []string
		wantErr  string
		wantWait time.Duration // the Retry-After of the *llm.APIError
	}{
		{name: "events up to the final one", status: 200, header: sse,
			body: "data: a\n\ndata: b\n\ndata: [DONE]\n\ndata: after\n\n", want: []string{"a", "b", "[DONE]"}},
		{name: "a stream that ends without its final event is no error here", status: 200, header: sse,
			body: "data: a\n\n", want: []string{"a"}},
		{name: "an error response", status: 429, header: map[string]string{"Retry-After": "2"},
			body: `{"error":"slow down, ` + secret + `"}`, wantErr: "test: 429 Too Many Requests: slow down, [redacted]", wantWait: 2 * time.Second},
		{name: "an error response in an unknown shape", status: 503, body: "<html>busy</html>",
			wantErr: "test: 503 Service Unavailable"},
		{name: "Anthropic's overloaded status", status: 529, body: `{}`, wantErr: "test: 529 Overloaded"},
		{name: "a success with an error body", status: 200, header: map[string]string{"Content-Type": "application/json"},
			body: `{"error":"model not loaded"}`, wantErr: `stream error: {"error":"model not loaded"}`},
		{name: "a success that is not a stream", status: 200, header: map[string]string{"Content-Type": "application/json"},
			body:    `{"text":"Hello"}`,
			wantErr: `test: the server answered 200 with "application/json" instead of an event stream; check that its base URL is a test API`},
		{name: "a stream labelled otherwise", status: 200, header: map[string]string{"Content-Type": "text/plain"},
			body: "data: a\n\ndata: [DONE]\n\n", want: []string{"a", "[DONE]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, sent := mustEndpoint(t, tt.status, tt.header, tt.body)
			var got []string
			err := e.Stream(t.Context(), []byte(`{"stream":true}`), collect(&got))
			assert.JSONEq(t, `{"stream":true}`, string(<-sent))
			assert.Equal(t, tt.want, got)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			if ae, ok := errors.AsType[*llm.APIError](err); ok {
				assert.ErrorIs(t, err, errdefs.ErrUpstream)
				assert.Equal(t, tt.wantWait, ae.RetryAfter)
			}
		})
	}
}

// TestEndpoint_Stream_HandleError: an error from handle ends the stream
// and comes back unchanged.
func TestEndpoint_Stream_HandleError(t *testing.T) {
	e, _ := mustEndpoint(t, 200, map[string]string{"Content-Type": "text/event-stream"}, "data: a\n\ndata: b\n\n")
	stop := errors.New("stop")
	calls := 0
	err := e.Stream(t.Context(), nil, func(llm.SSEEvent) (bool, error) {
		calls++
		return false, stop
	})
	require.Same(t, stop, err)
	assert.Equal(t, 1, calls)
}
