package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests hold kerneld to its connection limits the way a hostile
// client would test them: over raw TCP, against the real binary, with
// short limits.

// startLimited runs the kerneld binary with the memory store and the
// given http: settings (YAML lines under "http:"), and waits until it is
// ready without keeping a connection open.
func startLimited(t *testing.T, httpYAML string) *process {
	t.Helper()
	cfg := writeFile(t, t.TempDir(), "kerneld.yaml", "http:\n  addr: 127.0.0.1:0\n"+httpYAML+"store: {kind: memory}\n")
	return startBinary(t, "-config", cfg, "-agents-dir", "../../configs/agents")
}

// startBinary runs the kerneld binary with args, which must make it
// listen on a free port, and waits until it is ready without keeping a
// connection open. It is killed when the test ends.
func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{logs: &syncBuffer{}}
	p.cmd = exec.Command(buildBinary(t), args...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	p.base = "http://" + waitAddr(t, p.logs.String)
	pollUntil(t, "kerneld ready", func() bool { return p.status(t, "/readyz") == http.StatusOK })
	return p
}

// oneShot is a client that closes every connection after its request, so
// that it holds none of kerneld's connections between requests.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// status returns the status of GET path, or 0 if the request failed.
func (p *process) status(t *testing.T, path string) int {
	t.Helper()
	res, err := oneShot.Get(p.base + path)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// addr is the host:port kerneld listens on.
func (p *process) addr() string { return strings.TrimPrefix(p.base, "http://") }

// rawConn is one TCP connection to kerneld, spoken to by hand.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *process) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// get sends GET path with keep-alive and reads the response whole.
func (c *rawConn) get(path string) (*http.Response, []byte, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: kerneld\r\n\r\n", path); err != nil {
		return nil, nil, err
	}
	return c.readResponse()
}

func (c *rawConn) readResponse() (*http.Response, []byte, error) {
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// closedWithin waits up to d for the server to close c, and returns how
// long it took, or an error if c is still open then or sends data.
func (c *rawConn) closedWithin(d time.Duration) (time.Duration, error) {
	data, took, err := c.readToClose(d)
	if err == nil && len(data) > 0 {
		return took, fmt.Errorf("the server sent %q instead of closing", data)
	}
	return took, err
}

// readToClose reads what the server sends until it closes c, waiting up
// to d, and returns it and how long it took; an error if c is still open.
func (c *rawConn) readToClose(d time.Duration) ([]byte, time.Duration, error) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	data, err := io.ReadAll(c.r)
	if err != nil && !isReset(err) {
		return data, 0, fmt.Errorf("still open after %s: %w", d, err)
	}
	return data, time.Since(start), nil
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "connection reset")
}

// openFDs counts the descriptors kerneld has open, or -1 where /proc
// cannot tell.
func (p *process) openFDs() int {
	entries, err := os.ReadDir(filepath.Join("/proc", fmt.Sprint(p.cmd.Process.Pid), "fd"))
	if err != nil {
		return -1
	}
	return len(entries)
}

// TestProcess_IdleConnections: 5,000 clients make one request each and
// keep their connections open. kerneld keeps answering meanwhile, closes
// every one of them once it has been idle for idle_timeout (not before),
// and has its descriptors back.
func TestProcess_IdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const n, idle = 5000, 8 * time.Second
	if limit, err := raiseFileLimit(); err != nil || limit < n+500 {
		t.Skipf("needs %d descriptors in this process and in kerneld; the limit is %d (%v)", n+500, limit, err)
	}
	p := startLimited(t, fmt.Sprintf("  idle_timeout: %s\n  max_connections_per_address: 0\n", idle))
	before := p.openFDs()
	opening := time.Now()
	conns, answered := openIdle(t, p, n)
	t.Logf("%d connections opened and answered in %s", n, time.Since(opening).Round(time.Millisecond))
	lastIdx := 0
	for i, at := range answered {
		if at.After(answered[lastIdx]) {
			lastIdx = i
		}
	}
	lastAnswered := answered[lastIdx]
	// Every connection answered well within the idle timeout is still
	// open: kerneld holds a descriptor for each. (Opening 5,000 may take
	// longer than the idle timeout on a busy machine, so count those only,
	// with a second's slack: kerneld's clock starts when it has written
	// the answer, before this client has read it. The count before may
	// have held a connection of the readiness probe: allow two.)
	fds := p.openFDs()
	if got, want := fds, before-2+countSince(answered, time.Now().Add(time.Second-idle)); before >= 0 && got < want {
		t.Fatalf("kerneld holds %d descriptors, want at least %d: idle connections closed early?", got, want)
	} else {
		t.Logf("kerneld holds %d descriptors (%d before)", got, before)
	}
	if s := p.status(t, "/healthz"); s != http.StatusOK {
		t.Fatalf("with %d idle connections, GET /healthz = %d", n, s)
	}
	// The connection that answered last is still open half an idle
	// timeout later: idle connections are not cut early.
	last := conns[lastIdx]
	_ = last.SetReadDeadline(lastAnswered.Add(idle / 2))
	if _, err := last.r.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the last connection, idle for less than idle_timeout: %v, want it still open", err)
	}
	for i, c := range conns {
		if _, err := c.closedWithin(time.Until(lastAnswered.Add(idle + 10*time.Second))); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	t.Logf("%d idle connections closed %s after the last answer (idle_timeout %s)", n, time.Since(lastAnswered).Round(time.Millisecond), idle)
	if before >= 0 {
		pollUntil(t, "kerneld to release the descriptors", func() bool { return p.openFDs() < before+50 })
	}
	if s := p.status(t, "/healthz"); s != http.StatusOK {
		t.Fatalf("after the idle connections closed, GET /healthz = %d", s)
	}
}

// openIdle opens n connections that make one request each and stay open,
// and returns them with the time each was answered.
func openIdle(t *testing.T, p *process, n int) ([]*rawConn, []time.Time) {
	t.Helper()
	conns, answered := make([]*rawConn, n), make([]time.Time, n)
	const workers = 32
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := w; i < n; i += workers {
				c, err := net.DialTimeout("tcp", p.addr(), 10*time.Second)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				conns[i] = &rawConn{Conn: c, r: bufio.NewReader(c)}
				res, _, err := conns[i].get("/healthz")
				if err == nil && res.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", res.StatusCode)
				}
				if err != nil {
					errs <- fmt.Errorf("connection %d: GET /healthz: %w", i, err)
					return
				}
				answered[i] = time.Now()
			}
			errs <- nil
		}()
	}
	var err error
	for range workers {
		err = errors.Join(err, <-errs)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return conns, answered
}

// countSince counts the times at or after since.
func countSince(times []time.Time, since time.Time) int {
	n := 0
	for _, at := range times {
		if !at.Before(since) {
			n++
		}
	}
	return n
}

// TestProcess_ConnectionCap: with every connection under max_connections
// busy (each follows an event stream), the connection over it is
// accepted, answered 503 too_many_connections with Retry-After, and
// closed at once; a place that frees up is taken by the next client.
// (An idle connection would have been closed for it instead:
// TestProcess_IdleFloodAtTotalCap.)
func TestProcess_ConnectionCap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const limit = 20
	p := startLimited(t, fmt.Sprintf("  max_connections: %d\n  max_streams: %d\n", limit, limit))
	id := createSession(t, p)
	var held []*rawConn
	for len(held) < limit {
		c := dial(t, p)
		res, err := c.openStream(id)
		if err != nil {
			t.Fatalf("connection %d: %v", len(held), err)
		}
		if res.StatusCode != http.StatusOK {
			// The readiness probe's connection may not be counted out yet.
			waitFewerConns(t, p, len(held))
			continue
		}
		held = append(held, c)
	}

	start := time.Now()
	over := dial(t, p)
	res, body, err := over.get("/sessions")
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	wantRefused(t, res, body)
	if _, err := over.closedWithin(5 * time.Second); err != nil {
		t.Fatalf("the refused connection: %v", err)
	}
	t.Logf("refused and closed in %s", time.Since(start).Round(time.Millisecond))
	for i, c := range held {
		if _, err := c.r.Peek(1); err != nil { // the retry line, or a ping: the stream is alive
			t.Fatalf("held stream %d after the refusal: %v", i, err)
		}
	}

	_ = held[0].Close()
	pollUntil(t, "a new connection to take the freed place", func() bool {
		c := dial(t, p)
		defer c.Close()
		res, _, err := c.get("/healthz")
		return err == nil && res.StatusCode == http.StatusOK
	})
	if !strings.Contains(p.logs.String(), "connection limit reached") {
		t.Errorf("no log line says the connection limit was reached:\n%s", p.logs.String())
	}
}

// createSession creates an echo session with a connection of its own,
// closed after, and returns its id.
func createSession(t *testing.T, p *process) string {
	t.Helper()
	res, err := oneShot.Post(p.base+"/sessions", "application/json", strings.NewReader(`{"agent":"echo"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var s struct{ ID string }
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /sessions = %d %v", res.StatusCode, err)
	}
	return s.ID
}

// openStream asks for session id's event stream on c and reads the
// response's header; the stream stays open on c.
func (c *rawConn) openStream(id string) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := fmt.Fprintf(c, "GET /sessions/%s/events HTTP/1.1\r\nHost: kerneld\r\nAccept: text/event-stream\r\n\r\n", id); err != nil {
		return nil, err
	}
	return http.ReadResponse(c.r, nil)
}

// waitFewerConns waits until a connection beyond the n held is answered.
func waitFewerConns(t *testing.T, p *process, n int) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("room for connection %d", n+1), func() bool {
		c := dial(t, p)
		defer c.Close()
		res, _, err := c.get("/healthz")
		return err == nil && res.StatusCode == http.StatusOK
	})
}

// wantRefused checks a 503 too_many_connections answer.
func wantRefused(t *testing.T, res *http.Response, body []byte) {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	if res.StatusCode != http.StatusServiceUnavailable || p.Code != "too_many_connections" ||
		res.Header.Get("Retry-After") == "" || res.Header.Get("Content-Type") != "application/problem+json" || !res.Close {
		t.Fatalf("over the cap: %d %v %s, want 503 problem too_many_connections with Retry-After and Connection: close",
			res.StatusCode, res.Header, body)
	}
}

// TestProcess_SlowBody: a request body that arrives slower than
// min_body_rate once body_rate_grace has passed is cut off with 408
// body_too_slow; one fast enough for the rate but still arriving at
// read_timeout is too. Both within a second or two of their bound.
func TestProcess_SlowBody(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const grace, readTimeout = time.Second, 3 * time.Second
	p := startLimited(t, fmt.Sprintf("  min_body_rate: 100\n  body_rate_grace: %s\n  read_timeout: %s\n", grace, readTimeout))
	tests := []struct {
		name     string
		chunk    string        // sent every interval
		interval time.Duration //
		bound    time.Duration // when kerneld must cut it off
	}{
		{"one byte a second", "{", time.Second, grace + time.Second/100},
		{"fast enough, too long", strings.Repeat(" ", 40), 100 * time.Millisecond, readTimeout}, // 400 bytes/s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, p)
			start := time.Now()
			stop := make(chan struct{})
			dripped := make(chan struct{})
			go func() { defer close(dripped); drip(c, tt.chunk, tt.interval, stop) }()
			_ = c.SetReadDeadline(start.Add(tt.bound + 5*time.Second))
			res, body, err := c.readResponse()
			took := time.Since(start)
			close(stop)
			<-dripped
			if err != nil {
				t.Fatalf("no answer within %s: %v", tt.bound+5*time.Second, err)
			}
			var prob struct{ Code, Detail string }
			_ = json.Unmarshal(body, &prob)
			if res.StatusCode != http.StatusRequestTimeout || prob.Code != "body_too_slow" || !res.Close {
				t.Fatalf("answer = %d %v %s, want 408 body_too_slow with Connection: close", res.StatusCode, res.Header, body)
			}
			if took < tt.bound-100*time.Millisecond || took > tt.bound+2*time.Second {
				t.Errorf("cut off after %s, want about %s", took, tt.bound)
			}
			t.Logf("cut off after %s: %s", took.Round(time.Millisecond), prob.Detail)
			if _, err := c.closedWithin(5 * time.Second); err != nil {
				t.Errorf("after the 408: %v", err)
			}
		})
	}
	if s := p.status(t, "/healthz"); s != http.StatusOK {
		t.Fatalf("after the slow bodies, GET /healthz = %d", s)
	}
}

// drip sends a POST /sessions whose body announces 100,000 bytes, then
// chunk every interval, until stop is closed or a write fails.
func drip(c *rawConn, chunk string, interval time.Duration, stop <-chan struct{}) {
	_, err := io.WriteString(c, "POST /sessions HTTP/1.1\r\nHost: kerneld\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100000\r\n\r\n")
	t := time.NewTicker(interval)
	defer t.Stop()
	for err == nil {
		if _, err = io.WriteString(c, chunk); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// TestProcess_Slowloris: a client that sends its headers a byte at a time
// is disconnected at read_header_timeout, and holds nothing afterwards.
func TestProcess_Slowloris(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const headerTimeout = time.Second
	p := startLimited(t, fmt.Sprintf("  read_header_timeout: %s\n", headerTimeout))
	c := dial(t, p)
	start := time.Now()
	stop, dripped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(dripped)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: kerneld\r\n"); err != nil {
			return
		}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if _, err := io.WriteString(c, "X"); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	// net/http may say 400 Bad Request before it hangs up (a header
	// line cut by the deadline does not parse); what counts is that it
	// hangs up.
	data, _, err := c.readToClose(headerTimeout + 5*time.Second)
	took := time.Since(start)
	close(stop)
	<-dripped
	if err != nil {
		t.Fatalf("header drip: %v", err)
	}
	if len(data) > 0 && !strings.HasPrefix(string(data), "HTTP/1.1 400 ") {
		t.Errorf("before closing, kerneld sent %q, want nothing or a 400", data)
	}
	if took < headerTimeout-100*time.Millisecond || took > headerTimeout+2*time.Second {
		t.Errorf("closed after %s, want about read_header_timeout (%s)", took, headerTimeout)
	}
	t.Logf("header drip closed after %s", took.Round(time.Millisecond))
	if s := p.status(t, "/healthz"); s != http.StatusOK {
		t.Fatalf("after the header drip, GET /healthz = %d", s)
	}
}

// TestProcess_StreamOutlivesReadTimeout: event streams are not cut at
// read_timeout (net/http would cancel them when the read deadline passes):
// a GET stream keeps delivering after it, and a POST .../run stream
// delivers a run that lasts longer than it.
func TestProcess_StreamOutlivesReadTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const readTimeout = time.Second
	p := startLimited(t, fmt.Sprintf("  read_timeout: %s\n  heartbeat: 100ms\n", readTimeout))
	id := post(t, p.base+"/sessions", `{"agent":"echo"}`)["id"].(string)

	t.Run("GET events", func(t *testing.T) {
		res, err := http.Get(p.base + "/sessions/" + id + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		r := bufio.NewReader(res.Body)
		opened := time.Now()
		for time.Since(opened) < 3*readTimeout { // heartbeats keep coming
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatalf("stream ended %s after it opened (read_timeout %s): %v", time.Since(opened), readTimeout, err)
			}
		}
		post(t, p.base+"/sessions/"+id+"/run", `{"input":"still here"}`)
		frames := readUntil(t, r, func(f sseFrame) bool { return f.event == "RUN_FINISHED" })
		t.Logf("stream delivered %d events %s after it opened", len(frames), time.Since(opened).Round(time.Millisecond))
	})

	t.Run("POST run", func(t *testing.T) {
		// The echo agent sends a word every 20 ms: 150 words outlast
		// the read timeout.
		req, _ := http.NewRequest("POST", p.base+"/sessions/"+id+"/run",
			strings.NewReader(`{"input":"`+strings.Repeat("word ", 150)+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		opened := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST run = %d", res.StatusCode)
		}
		readUntil(t, res.Body, func(f sseFrame) bool { return f.event == "RUN_FINISHED" })
		if took := time.Since(opened); took < readTimeout {
			t.Fatalf("the run streamed in %s, under read_timeout (%s): it proves nothing", took, readTimeout)
		} else {
			t.Logf("run streamed whole in %s (read_timeout %s)", took.Round(time.Millisecond), readTimeout)
		}
	})
}
