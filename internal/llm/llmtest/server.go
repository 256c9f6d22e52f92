// Package llmtest holds test helpers shared by the provider packages
// (llm/openai, llm/anthropic): a scripted HTTP server that records what it
// receives, a collector that puts a streamed response back together, and
// checks of the behaviour every network provider must have, run against a
// provider's real client over real HTTP, however the server frames its
// event stream on the wire.
//
// It knows no wire format: each provider's tests build the replies in their
// own API's format and hand them in. It must not be imported outside tests.
package llmtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Server is a scripted HTTP server standing in for a model API. Each
// request gets the next reply of its script (the last one repeats), and
// the server keeps what it received.
type Server struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replies []Reply
	got     []Received
}

// Reply answers one request.
type Reply func(w http.ResponseWriter, r *http.Request)

// Received is one request as the server saw it.
type Received struct {
	Path   string
	Header http.Header
	Body   map[string]any // the body decoded as a JSON object; nil if it is not one
	Raw    []byte         // the body as sent
	At     time.Time      // when it arrived
}

// NewServer starts a server that answers with replies, which must not be
// empty, and closes it when tb ends.
func NewServer(tb testing.TB, replies ...Reply) *Server {
	tb.Helper()
	require.NotEmpty(tb, replies, "a server needs at least one reply")
	s := &Server{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.srv.Close)
	return s
}

// serve records the request and answers it with the next reply.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body) // a body that is not an object stays nil; Raw has it
	s.mu.Lock()
	s.got = append(s.got, Received{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw, At: time.Now()})
	next := s.replies[min(len(s.got), len(s.replies))-1]
	s.mu.Unlock()
	next(w, r)
}

// URL is the server's root URL, without a trailing slash.
func (s *Server) URL() string { return s.srv.URL }

// Requests returns what the server has received so far, in order.
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.got...)
}

// Member returns the member name of the request body as JSON text, for
// comparing with assert.JSONEq.
func (r Received) Member(tb testing.TB, name string) string {
	tb.Helper()
	b, err := json.Marshal(r.Body[name])
	require.NoError(tb, err)
	return string(b)
}

// Status replies with an error status, headers and a body. The body is
// labelled JSON unless headers say otherwise.
func Status(code int, headers map[string]string, body string) Reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// Cut runs r, then drops the connection without ending the response, as a
// network failure mid-stream would.
func Cut(r Reply) Reply {
	return func(w http.ResponseWriter, req *http.Request) {
		r(w, req)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

// tokenInterval is how often Trickle sends a token.
const tokenInterval = 20 * time.Millisecond

// Trickle replies 200 with an event stream that never ends: it writes each
// opening event, then token every 20ms until the client leaves, and then
// closes closed, so a test can tell that the client hung up. write puts one
// event on the wire in the provider's format and flushes it.
func Trickle(closed chan<- struct{}, write func(http.ResponseWriter, string), token string, opening ...string) Reply {
	return func(w http.ResponseWriter, r *http.Request) {
		defer close(closed)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range opening {
			write(w, ev)
		}
		tick := time.NewTicker(tokenInterval)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				write(w, token)
			}
		}
	}
}

// hang answers nothing until the client leaves.
func hang(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
