package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/openai"
)

// testKey is the API key the tests configure; no error may show it.
const testKey = "sk-test-Z9y8X7w6V5u4"

// fakeServer speaks OpenAI's Chat Completions streaming wire format. Each
// request gets the next reply of its script (the last one repeats), and
// the server keeps what it received.
type fakeServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	got     []received
}

// reply answers one request.
type reply func(w http.ResponseWriter, r *http.Request)

// received is one request as the server saw it.
type received struct {
	path   string
	header http.Header
	body   map[string]any
	at     time.Time
}

func newFake(tb testing.TB, replies ...reply) *fakeServer {
	tb.Helper()
	f := &fakeServer{replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.got = append(f.got, received{path: r.URL.Path, header: r.Header.Clone(), body: body, at: time.Now()})
	next := f.replies[min(len(f.got), len(f.replies))-1]
	f.mu.Unlock()
	next(w, r)
}

// baseURL is what an agent's base_url would say for this server.
func (f *fakeServer) baseURL() string { return f.srv.URL + "/v1" }

// requests returns what the server has received so far.
func (f *fakeServer) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

// stream replies 200 with the events as SSE, flushing after each: a
// JSON object or [DONE] becomes a data line, and text starting with ':' a
// comment line, as OpenAI-compatible proxies send keep-alives.
func stream(events ...string) reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			writeEvent(w, ev)
		}
	}
}

func writeEvent(w http.ResponseWriter, ev string) {
	if strings.HasPrefix(ev, ":") {
		_, _ = io.WriteString(w, ev+"\n\n")
	} else {
		_, _ = io.WriteString(w, "data: "+ev+"\n\n")
	}
	w.(http.Flusher).Flush()
}

// cut sends the events, then drops the connection mid-stream.
func cut(events ...string) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		stream(events...)(w, r)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

// status replies with an error status, headers and a body.
func status(code int, headers map[string]string, body string) reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// The chat.completion.chunk objects below are what OpenAI streams, field
// for field.
const chunkHead = `{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1732000000,` +
	`"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[`

// chunk is a chunk of choice 0 with a delta and a finish_reason ("": null).
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return chunkHead + `{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}`
}

// roleChunk opens the assistant message, as OpenAI's first chunk does.
func roleChunk() string { return chunk(`{"role":"assistant","content":"","refusal":null}`, "") }

func textChunk(s string) string { return chunk(`{"content":`+jsonString(s)+`}`, "") }

func finishChunk(reason string) string { return chunk(`{}`, reason) }

// usageChunk is the last chunk with stream_options.include_usage.
func usageChunk(in, out int) string {
	return chunkHead + fmt.Sprintf(`],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":`+
		`{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		in, out, in+out)
}

// callStart is the first piece of tool call index: id, type and name.
func callStart(index int, id, name string) string {
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`,
		index, id, name), "")
}

// callArgs is a later piece of tool call index: an arguments fragment.
func callArgs(index int, fragment string) string {
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, index, jsonString(fragment)), "")
}

const done = "[DONE]"

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// mustClient builds a client for the fake server with extra options.
func mustClient(tb testing.TB, f *fakeServer, opts map[string]any) llm.Provider {
	tb.Helper()
	p, err := openai.New(llm.ModelConfig{Provider: "openai", Name: "gpt-4o-mini", BaseURL: f.baseURL(), APIKey: testKey, Options: opts})
	require.NoError(tb, err)
	return p
}

// result is a streamed response put back together.
type result struct {
	chunks    []llm.Chunk
	text      string
	reasoning string
	calls     []call // by index
	usage     *llm.Usage
}

type call struct{ id, name, args string }

// collect streams req and assembles what was emitted.
func collect(tb testing.TB, p llm.Provider, req llm.Request) (result, error) {
	tb.Helper()
	var r result
	err := p.Stream(tb.Context(), req, func(c llm.Chunk) error {
		r.add(c)
		return nil
	})
	return r, err
}

func (r *result) add(c llm.Chunk) {
	r.chunks = append(r.chunks, c)
	r.text += c.Text
	r.reasoning += c.Reasoning
	if c.Usage != nil {
		u := *c.Usage
		r.usage = &u
	}
	if d := c.ToolCall; d != nil {
		for len(r.calls) <= d.Index {
			r.calls = append(r.calls, call{})
		}
		cl := &r.calls[d.Index]
		if cl.id == "" {
			cl.id = d.ID
		}
		if cl.name == "" {
			cl.name = d.Name
		}
		cl.args += d.Arguments
	}
}

// hello is a request with one user message.
var hello = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello"}}}
