package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
)

// testKey is the API key the tests configure; no error may show it.
const testKey = "sk-ant-test-Q1w2E3r4T5y6"

// fakeServer speaks the Messages API's streaming wire format. Each request
// gets the next reply of its script (the last one repeats), and the server
// keeps what it received.
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
	raw    []byte
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
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.got = append(f.got, received{path: r.URL.Path, header: r.Header.Clone(), body: body, raw: raw, at: time.Now()})
	next := f.replies[min(len(f.got), len(f.replies))-1]
	f.mu.Unlock()
	next(w, r)
}

// requests returns what the server has received so far.
func (f *fakeServer) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

// stream replies 200 with the events as SSE, flushing after each. Each
// event is its JSON data; the SSE event name is its "type".
func stream(events ...string) reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		for _, ev := range events {
			writeEvent(w, ev)
		}
	}
}

// eventType finds an event's type in its data, even in malformed data.
var eventType = regexp.MustCompile(`^\{"type": ?"([a-z_]+)"`)

func writeEvent(w http.ResponseWriter, data string) {
	name := ""
	if m := eventType.FindStringSubmatch(data); m != nil {
		name = m[1]
	}
	_, _ = io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n")
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

// apiError is the body of an error response or error event.
func apiError(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CTest"}`, typ, msg)
}

// The events below are what the Messages API streams, field for field.

func messageStart(inputTokens int) string {
	return fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01Test","type":"message","role":"assistant",`+
		`"content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":`+
		`{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`,
		inputTokens)
}

const ping = `{"type": "ping"}`

func textStart(i int) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i)
}

func textDelta(i int, s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, jsonString(s))
}

func toolStart(i int, id, name string) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`,
		i, id, name)
}

func inputDelta(i int, partial string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`,
		i, jsonString(partial))
}

func thinkingStart(i int) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i)
}

func thinkingDelta(i int, s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, i, jsonString(s))
}

func signatureDelta(i int, sig string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%q}}`, i, sig)
}

func blockStop(i int) string {
	return fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)
}

func messageDelta(stopReason string, outputTokens int) string {
	return fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`,
		stopReason, outputTokens)
}

const messageStop = `{"type":"message_stop"}`

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// textReply is a complete stream answering text.
func textReply(text string, in, out int) reply {
	return stream(messageStart(in), textStart(0), ping, textDelta(0, text), blockStop(0), messageDelta("end_turn", out), messageStop)
}

// mustClient builds a client for the fake server with extra options.
func mustClient(tb testing.TB, f *fakeServer, opts map[string]any) llm.Provider {
	tb.Helper()
	p, err := anthropic.New(llm.ModelConfig{Provider: "anthropic", Name: "claude-sonnet-4-5", BaseURL: f.srv.URL, APIKey: testKey, Options: opts})
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

// bodyJSON returns a request body member as JSON text, for JSONEq.
func bodyJSON(tb testing.TB, r received, member string) string {
	tb.Helper()
	b, err := json.Marshal(r.body[member])
	require.NoError(tb, err)
	return string(b)
}
