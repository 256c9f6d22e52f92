package httpapi_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestEventStream_Golden pins the exact frames of a run with a tool call.
func TestEventStream_Golden(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	ts.startRun(t, id, "What time is it?")
	s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
	var b strings.Builder
	for {
		f, err := s.next()
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		fmt.Fprintf(&b, "%s\n", f.raw())
		if runEnded(f) {
			break
		}
	}
	checkGolden(t, "stream_tool_call.golden", mask(b.String()))
}

// TestEventStream_Headers checks the anti-buffering headers and the retry
// line that starts every stream.
func TestEventStream_Headers(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
	for name, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
	} {
		if got := s.res.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	f, err := s.next()
	if err != nil || f.retry == "" {
		t.Fatalf("first frame = %+v, %v; want a retry line", f, err)
	}
}

// TestEventStream_ResumeFromEverySeq resumes a finished session's stream
// from every seq, by header and by query, and expects exactly the tail.
func TestEventStream_ResumeFromEverySeq(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	ts.waitRun(t, id, ts.startRun(t, id, "first"))
	ts.waitRun(t, id, ts.startRun(t, id, "second"))
	if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
		t.Fatal(err)
	}
	all := ts.openStream(t, "GET", "/sessions/"+id+"/events", "").events(t, nil)
	n := int64(len(all))
	assertSeqs(t, all, 1, n)
	for after := int64(0); after < n; after++ {
		byHeader := ts.openStream(t, "GET", "/sessions/"+id+"/events", "", "Last-Event-ID", strconv.FormatInt(after, 10))
		assertSameFrames(t, all[after:], byHeader.events(t, nil))
		byQuery := ts.openStream(t, "GET", "/sessions/"+id+"/events?after="+strconv.FormatInt(after, 10), "")
		assertSameFrames(t, all[after:], byQuery.events(t, nil))
	}
	// At the end of a closed session's log there is nothing to stream:
	// 204 stops an EventSource from reconnecting.
	last := strconv.FormatInt(n, 10)
	for _, res := range []response{
		ts.do(t, "GET", "/sessions/"+id+"/events", "", "Accept", "text/event-stream", "Last-Event-ID", last),
		ts.do(t, "GET", "/sessions/"+id+"/events?after="+last, "", "Accept", "text/event-stream"),
	} {
		if res.status != http.StatusNoContent || len(res.body) != 0 {
			t.Errorf("resume after the last event of a closed session = %d %q, want 204 and no body", res.status, res.body)
		}
	}
}

// TestEventStream_JoinMidRun joins a running session at several points and
// expects a gapless sequence to the run's end, with no duplicate.
func TestEventStream_JoinMidRun(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "slow")
	ts.startRun(t, id, "go")
	var streams []*sseStream
	var cursors []int64
	for i := range 5 {
		waitSeq(t, ts, id, int64(4+i*5))
		cursor := int64(i * 3) // 0 replays from the start
		cursors = append(cursors, cursor)
		streams = append(streams, ts.openStream(t, "GET", "/sessions/"+id+"/events?after="+strconv.FormatInt(cursor, 10), ""))
	}
	for i, s := range streams {
		frames := s.events(t, runEnded)
		last := frames[len(frames)-1]
		if !runEnded(last) {
			t.Fatalf("stream %d ended at %s", i, last.event)
		}
		assertSeqs(t, frames, cursors[i]+1, last.id)
	}
}

// TestEventStream_ManyJoinersUnderLoad opens streams while a run emits as
// fast as it can; every stream must see every event once, in order.
func TestEventStream_ManyJoinersUnderLoad(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	input := strings.Repeat("token ", 3000)
	ts.startRun(t, id, input)
	var streams []*sseStream
	for range 8 {
		streams = append(streams, ts.openStream(t, "GET", "/sessions/"+id+"/events", ""))
	}
	for _, s := range streams {
		frames := s.events(t, runEnded)
		assertSeqs(t, frames, 1, frames[len(frames)-1].id)
	}
}

// TestEventStream_SlowSubscriberDropped connects a client that never reads.
// The run must finish while that client is still connected (nothing the
// run does waits for a client), and the stuck stream must then be dropped
// once a write is not accepted within the write timeout.
func TestEventStream_SlowSubscriberDropped(t *testing.T) {
	t.Parallel()
	// Far longer than the run takes, so the run ends with the stream open.
	const writeTimeout = 20 * time.Second
	const feedBytes = 64 << 10 // far below the run's frames (~4 MB)
	ts := newServer(t, serverOptions{streams: httpapi.StreamOptions{WriteTimeout: writeTimeout, FeedBytes: feedBytes}})
	id := ts.createSession(t, "echo")
	conn := stuckClient(t, ts, id)
	defer conn.Close()
	waitFor(t, "stuck stream open", func() bool { return ts.streams.Open() == 1 })

	input := strings.Repeat("sixteen-byte-wd ", 15000) // 240 KB echoed as 15,000 events
	run := ts.waitRun(t, id, ts.startRun(t, id, input))
	if run["state"] != "succeeded" {
		t.Fatalf("run = %v, want succeeded", run["state"])
	}
	if open := ts.streams.Open(); open != 1 {
		t.Fatalf("%d streams open when the run ended, want the stuck one: the run waited for it", open)
	}
	if held := ts.streams.Buffered(); held > feedBytes {
		t.Errorf("the hub holds %d bytes for the stuck stream, want at most %d", held, feedBytes)
	}
	deadline := time.Now().Add(writeTimeout + 10*time.Second)
	for ts.streams.Open() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stuck stream was not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A client that reads gets the whole run from the log.
	frames := ts.openStream(t, "GET", "/sessions/"+id+"/events", "").events(t, runEnded)
	assertSeqs(t, frames, 1, frames[len(frames)-1].id)
}

// stuckClient opens an event stream on a raw connection and never reads it.
func stuckClient(t *testing.T, ts *testServer, id string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // keep the kernel from absorbing the whole run
	}
	fmt.Fprintf(conn, "GET /sessions/%s/events HTTP/1.1\r\nHost: kerneld\r\nAccept: text/event-stream\r\n\r\n", id)
	return conn
}

// TestRunCreate_Stream runs with Accept: text/event-stream: the response
// carries the run's frames and ends after its last event.
func TestRunCreate_Stream(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	ts.waitRun(t, id, ts.startRun(t, id, "earlier run"))

	s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"now"}`)
	if loc := s.res.Header.Get("Location"); !strings.HasPrefix(loc, "/sessions/"+id+"/runs/") {
		t.Errorf("Location = %q", loc)
	}
	frames := s.events(t, nil) // to EOF: the server must end the response
	if frames[0].event != "RUN_STARTED" || !runEnded(frames[len(frames)-1]) {
		t.Fatalf("stream from %s to %s, want one whole run", frames[0].event, frames[len(frames)-1].event)
	}
	assertSeqs(t, frames, frames[0].id, frames[len(frames)-1].id)
	aguitest.VerifyJSON(t, dataObjects(frames))

	// The same frames are in the session's stream.
	after := strconv.FormatInt(frames[0].id-1, 10)
	again := ts.openStream(t, "GET", "/sessions/"+id+"/events?after="+after, "").events(t, runEnded)
	assertSameFrames(t, frames, again)
}

// TestRunCreate_StreamReplayed streams a run replayed by Idempotency-Key
// after it ended: the whole run, then the end of the response.
func TestRunCreate_StreamReplayed(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	first := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"once"}`, "Idempotency-Key", "k-1").events(t, nil)
	second := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"once"}`, "Idempotency-Key", "k-1")
	if second.res.Header.Get("Idempotent-Replayed") != "true" {
		t.Error("Idempotent-Replayed header missing")
	}
	assertSameFrames(t, first, second.events(t, nil))
}

// TestEventStream_EndsWhenSessionEnds: closing or deleting a session ends
// its streams after the final event; a closed session's stream ends after
// its backlog.
func TestEventStream_EndsWhenSessionEnds(t *testing.T) {
	ts := newServer(t, serverOptions{})
	t.Run("deleted mid-run", func(t *testing.T) {
		id := ts.createSession(t, "slow")
		ts.startRun(t, id, "go")
		s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
		waitSeq(t, ts, id, 6)
		ts.must(t, http.StatusNoContent, "DELETE", "/sessions/"+id, "")
		frames := s.events(t, nil) // to EOF
		last := frames[len(frames)-1]
		if last.event != "RUN_FINISHED" || !strings.Contains(last.data, `"reason":"cancelled"`) {
			t.Fatalf("last frame = %s %s, want a cancelled RUN_FINISHED", last.event, last.data)
		}
		aguitest.VerifyJSON(t, dataObjects(frames))
		// The EventSource reconnects: 204 stops it. Without a cursor the
		// session is simply not found.
		cursor := strconv.FormatInt(last.id, 10)
		for _, res := range []response{
			ts.do(t, "GET", "/sessions/"+id+"/events", "", "Accept", "text/event-stream", "Last-Event-ID", cursor),
			ts.do(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "", "Accept", "text/event-stream", "Last-Event-ID", cursor),
			ts.do(t, "GET", "/sessions/"+id+"/events?after="+cursor, "", "Accept", "text/event-stream"),
		} {
			if res.status != http.StatusNoContent || len(res.body) != 0 {
				t.Errorf("resume of a deleted session = %d %q, want 204 and no body", res.status, res.body)
			}
		}
		wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/events", "", "Accept", "text/event-stream"), http.StatusNotFound, "session_not_found")
	})
	t.Run("closed while idle", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		ts.waitRun(t, id, ts.startRun(t, id, "hi"))
		s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
		frames := s.events(t, runEnded)
		if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
			t.Fatal(err)
		}
		if rest := s.events(t, nil); len(rest) != 0 {
			t.Fatalf("after close: %d more frames", len(rest))
		}
		later := ts.openStream(t, "GET", "/sessions/"+id+"/events", "").events(t, nil)
		assertSameFrames(t, frames, later)
	})
	t.Run("closed with no events", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
			t.Fatal(err)
		}
		if res := ts.do(t, "GET", "/sessions/"+id+"/events", "", "Accept", "text/event-stream"); res.status != http.StatusNoContent {
			t.Fatalf("stream of a closed session without events = %d %s, want 204", res.status, res.body)
		}
	})
}

// TestEventStream_Heartbeat: an idle stream gets ": ping" comments.
func TestEventStream_Heartbeat(t *testing.T) {
	ts := newServer(t, serverOptions{streams: httpapi.StreamOptions{Heartbeat: 20 * time.Millisecond}})
	s := ts.openStream(t, "GET", "/sessions/"+ts.createSession(t, "echo")+"/events", "")
	for {
		f, err := s.next()
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		if f.comment == "ping" {
			return
		}
	}
}

// TestEventStream_CloseStreams: shutting down ends open streams at once.
func TestEventStream_CloseStreams(t *testing.T) {
	ts := newServer(t, serverOptions{})
	s := ts.openStream(t, "GET", "/sessions/"+ts.createSession(t, "echo")+"/events", "")
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := s.next(); err != nil {
				done <- err
				return
			}
		}
	}()
	ts.api.CloseStreams()
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("stream ended with %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after CloseStreams")
	}
	res := ts.do(t, "GET", "/sessions/"+ts.createSession(t, "echo")+"/events", "", "Accept", "text/event-stream")
	wantProblem(t, res, http.StatusServiceUnavailable, "shutting_down")
}

// TestEventStream_AGUI checks the logs of a tool run, runs cancelled
// mid-message and mid-tool, and a failed run with the official AG-UI
// packages, as a client reads them from the stream.
func TestEventStream_AGUI(t *testing.T) {
	ts := newServer(t, serverOptions{})
	cancelWhen := func(id, runID string, ready func()) {
		ready()
		ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+runID+"/cancel", "")
	}
	tests := []struct {
		name, agent string
		during      func(id, runID string)
	}{
		{"tool call", "tooluser", nil},
		{"cancelled mid-message", "slow", func(id, runID string) {
			cancelWhen(id, runID, func() { waitSeq(t, ts, id, 8) })
		}},
		{"cancelled mid-tool", "waiter", func(id, runID string) {
			cancelWhen(id, runID, func() { <-ts.kernel.Wait.Started() })
		}},
		{"failed", "failing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := ts.createSession(t, tt.agent)
			s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
			runID := ts.startRun(t, id, "hello")
			if tt.during != nil {
				tt.during(id, runID)
			}
			aguitest.VerifyJSON(t, dataObjects(s.events(t, runEnded)))
		})
	}
}

// raw renders a frame as it appeared on the wire.
func (f frame) raw() string {
	switch {
	case f.retry != "":
		return "retry: " + f.retry + "\n"
	case f.id == 0:
		return ": " + f.comment + "\n"
	}
	return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n", f.id, f.event, f.data)
}

var (
	idPattern    = regexp.MustCompile(`("[A-Za-z]*I[dD]":")([^"]+)"`)
	stampPattern = regexp.MustCompile(`"timestamp":\d+`)
	timePattern  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// mask replaces what changes between runs (ids, clocks) with stable
// placeholders; a repeated id keeps its placeholder, so the golden still
// shows which events share a message or call.
func mask(s string) string {
	ids := map[string]string{}
	s = idPattern.ReplaceAllStringFunc(s, func(m string) string {
		parts := idPattern.FindStringSubmatch(m)
		id := parts[2]
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("<id%d>", len(ids)+1)
		}
		return parts[1] + ids[id] + `"`
	})
	s = stampPattern.ReplaceAllString(s, `"timestamp":0`)
	return timePattern.ReplaceAllString(s, "<time>")
}

// checkGolden compares got with testdata/name; -update rewrites it.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

// assertSeqs checks that frames carry exactly the seqs from..to in order,
// and that each frame's data is an event of the frame's type.
func assertSeqs(t *testing.T, frames []frame, from, to int64) {
	t.Helper()
	if int64(len(frames)) != to-from+1 {
		t.Fatalf("got %d frames, want seqs %d..%d", len(frames), from, to)
	}
	for i, f := range frames {
		if want := from + int64(i); f.id != want {
			t.Fatalf("frame %d has id %d, want %d", i, f.id, want)
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil || ev.Type != f.event {
			t.Fatalf("frame %d: data %s does not match event %s", i, f.data, f.event)
		}
	}
}

func assertSameFrames(t *testing.T, want, got []frame) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(frame{}), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("frames differ (-want +got):\n%s", diff)
	}
}

// waitSeq waits until the session's log holds seq.
func waitSeq(t *testing.T, ts *testServer, id string, seq int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("seq %d", seq), func() bool {
		s, err := ts.kernel.GetSession(kctx(t), id)
		return err == nil && s.LastSeq >= seq
	})
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestEventStream_ChildResumable: a spawned child's own stream is a
// session stream like any other, resumable from any seq.
func TestEventStream_ChildResumable(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "delegator")
	ts.waitRun(t, id, ts.startRun(t, id, "go"))
	children := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/children", "")["data"].([]any)
	if len(children) != 1 {
		t.Fatalf("children = %v", children)
	}
	child := children[0].(map[string]any)["id"].(string)
	all := ts.openStream(t, "GET", "/sessions/"+child+"/events", "").events(t, nil) // closed: the stream ends
	aguitest.VerifyJSON(t, dataObjects(all))
	for after := range len(all) {
		tail := ts.openStream(t, "GET", "/sessions/"+child+"/events", "", "Last-Event-ID", strconv.Itoa(after)).events(t, nil)
		assertSameFrames(t, all[after:], tail)
	}
}
