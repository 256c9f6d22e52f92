package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a real kerneld API over a real kernel on a loopback port.
type testServer struct {
	*httptest.Server
	kernel  *kerneltest.Kernel
	streams *httpapi.Streams
	api     *httpapi.Server
}

// serverOptions tune newServer.
type serverOptions struct {
	kernel  kerneltest.Options
	api     httpapi.Options
	streams httpapi.StreamOptions
	// unchecked skips validating responses against the spec, for tests
	// whose streams are too long to check frame by frame in reasonable time.
	unchecked bool
	// feed serves GET /sessions/events.
	feed bool
}

// newServer starts a test server. Every response it gives is validated
// against api/openapi.yaml, unless opts.unchecked.
func newServer(t *testing.T, opts serverOptions) *testServer {
	t.Helper()
	var wrap func(http.Handler) http.Handler
	if !opts.unchecked {
		wrap = func(h http.Handler) http.Handler { return withSpecValidation(t, h) }
	}
	srv := httpapitest.New(t, httpapitest.Options{Kernel: opts.kernel, API: opts.api, Streams: opts.streams, Wrap: wrap, Feed: opts.feed})
	return &testServer{Server: srv.Server, kernel: srv.Kernel, streams: srv.Streams, api: srv.API}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a fresh map.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return m
}

// do sends a request with an optional JSON body and returns the response.
func (ts *testServer) do(t *testing.T, method, path, body string, header ...string) response {
	t.Helper()
	return ts.doCtx(t.Context(), t, method, path, body, header...)
}

// doWithin is do for a request that must be answered within d: one that
// might wrongly open a stream fails the test instead of hanging it.
func (ts *testServer) doWithin(t *testing.T, d time.Duration, method, path, body string, header ...string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return ts.doCtx(ctx, t, method, path, body, header...)
}

// doCtx is do under ctx.
func (ts *testServer) doCtx(ctx context.Context, t *testing.T, method, path, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// must sends a request and fails the test unless the status is want.
func (ts *testServer) must(t *testing.T, want int, method, path, body string, header ...string) map[string]any {
	t.Helper()
	res := ts.do(t, method, path, body, header...)
	if res.status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, res.status, res.body, want)
	}
	if len(res.body) == 0 {
		return nil
	}
	return res.json(t)
}

// createSession creates a session for agent and returns its id.
func (ts *testServer) createSession(t *testing.T, agent string) string {
	t.Helper()
	return ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"`+agent+`"}`)["id"].(string)
}

// startRun posts input to a session and returns the run's id.
func (ts *testServer) startRun(t *testing.T, id, input string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input})
	return ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", string(body))["id"].(string)
}

// waitRun polls until the run has ended and returns it.
func (ts *testServer) waitRun(t *testing.T, id, runID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "")
		if run["ended_at"] != nil {
			return run
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", runID)
	return nil
}

// frame is one parsed SSE frame.
type frame struct {
	id      int64 // 0 when the frame had no id
	event   string
	data    string
	comment string
	retry   string
}

// sseStream is an open SSE response being read frame by frame.
type sseStream struct {
	res    *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openStream opens an SSE request and checks the stream headers.
func (ts *testServer) openStream(t *testing.T, method, path, body string, header ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open stream %s: %v", path, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		t.Fatalf("open stream %s = %d %s", path, res.StatusCode, b)
	}
	s := &sseStream{res: res, r: bufio.NewReader(res.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next reads the next frame; io.EOF when the server ended the stream.
func (s *sseStream) next() (frame, error) {
	var f frame
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if f != (frame{}) {
				return f, nil
			}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "":
			f.comment = value
		case "id":
			f.id, _ = strconv.ParseInt(value, 10, 64)
		case "event":
			f.event = value
		case "data":
			f.data = value
		case "retry":
			f.retry = value
		}
	}
}

// events reads frames until the stream ends or stop returns true for an
// event frame, and returns the event frames read.
func (s *sseStream) events(t *testing.T, stop func(frame) bool) []frame {
	t.Helper()
	var out []frame
	for {
		f, err := s.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		if f.id == 0 {
			continue
		}
		out = append(out, f)
		if stop != nil && stop(f) {
			return out
		}
	}
}

// runEnded stops a read at the end of a run.
func runEnded(f frame) bool { return f.event == "RUN_FINISHED" || f.event == "RUN_ERROR" }

// dataObjects returns the frames' data as the wire objects of a JSON event
// page: with each frame's id as metadata.kerneld.seq, which a frame's data
// leaves to its id line.
func dataObjects(frames []frame) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = withSeq(f.data, f.id)
	}
	return out
}

// withSeq returns the event object data with metadata.kerneld.seq set.
func withSeq(data string, seq int64) []byte {
	var ev map[string]any
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return []byte(data) // the checker reports it
	}
	if md, ok := ev["metadata"].(map[string]any); ok {
		if k, ok := md["kerneld"].(map[string]any); ok {
			k["seq"] = seq
		}
	}
	b, _ := json.Marshal(ev) // decoded from JSON, so it encodes
	return b
}

// compactJSON returns b compacted, for comparing bodies.
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %s: %v", b, err)
	}
	return buf.String()
}

// kctx returns a context for calling the kernel directly as the tenant
// that unauthenticated HTTP callers act as.
func kctx(t *testing.T) context.Context {
	return kernel.WithTenant(t.Context(), httpapi.DefaultTenant)
}
