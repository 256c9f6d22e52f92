package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// cappedServer is an http.Server on a loopback port under a ConnLimit,
// with two routes: GET / answers at once; GET /hold answers once release
// is called, so that its connection stays active meanwhile.
type cappedServer struct {
	limit   *httpapi.ConnLimit
	addr    string
	holding atomic.Int64 // requests inside /hold
	release func()
	logs    *lockedBuffer
}

func startCapped(t *testing.T, opts httpapi.ConnLimitOptions) *cappedServer {
	t.Helper()
	cs := &cappedServer{logs: &lockedBuffer{}}
	opts.Logger = slog.New(slog.NewTextHandler(cs.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cs.limit = httpapi.NewConnLimit(opts)
	released := make(chan struct{})
	var once sync.Once
	cs.release = func() { once.Do(func() { close(released) }) }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /hold", func(w http.ResponseWriter, r *http.Request) {
		cs.holding.Add(1)
		defer cs.holding.Add(-1)
		select {
		case <-released:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "held")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	cs.limit.Install(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cs.addr = ln.Addr().String()
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(cs.limit.Listener(ln)) }()
	t.Cleanup(func() {
		cs.release()
		_ = srv.Close()
		<-served
	})
	return cs
}

// conn is one client connection, spoken to by hand.
type conn struct {
	net.Conn
	r *bufio.Reader
}

// dialFrom connects to cs from the loopback address from ("127.0.0.2"
// is another client than "127.0.0.1").
func (cs *cappedServer) dialFrom(t *testing.T, from string) *conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", cs.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &conn{Conn: c, r: bufio.NewReader(c)}
}

// get sends GET path with keep-alive (and header lines, if any) and reads
// the whole response.
func (c *conn) get(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	res, body, err := c.tryGet(path, header...)
	require.NoError(t, err, "GET %s", path)
	return res, body
}

func (c *conn) tryGet(path string, header ...string) (*http.Response, string, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	req := "GET " + path + " HTTP/1.1\r\nHost: kerneld\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return nil, "", err
	}
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, string(body), err
}

// send writes a request without waiting for its answer.
func (c *conn) send(t *testing.T, path string, header ...string) {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: kerneld\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	_, err := io.WriteString(c, req+"\r\n")
	require.NoError(t, err)
}

// closedWithin reports whether the server closes c within d, reading
// (and discarding) whatever it sends first.
func (c *conn) closedWithin(d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.r)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// wantRefusal checks a refusal: status, problem code and Retry-After.
func wantRefusal(t *testing.T, res *http.Response, body string, status int, code string) {
	t.Helper()
	var p struct{ Code string }
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	assert.Equal(t, status, res.StatusCode, body)
	assert.Equal(t, code, p.Code)
	assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	assert.NotEmpty(t, res.Header.Get("Retry-After"))
}

// TestConnLimit_ReclaimsLongestIdle: at the cap, a new connection is
// served and the connection idle longest is closed for it, not the one
// that opened first.
func TestConnLimit_ReclaimsLongestIdle(t *testing.T) {
	cs := startCapped(t, httpapi.ConnLimitOptions{Max: 3})
	var conns []*conn
	for i := range 3 {
		c := cs.dialFrom(t, "127.0.0.1")
		c.get(t, "/")
		waitFor(t, "the connection to be idle", func() bool { return cs.limit.Idle() == i+1 })
		conns = append(conns, c)
	}
	c1, c2, c3 := conns[0], conns[1], conns[2]
	c1.get(t, "/") // c1 is now the most recently used: c2 has been idle longest
	waitFor(t, "three idle connections", func() bool { return cs.limit.Idle() == 3 })

	start := time.Now()
	res, body := cs.dialFrom(t, "127.0.0.1").get(t, "/")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	t.Logf("the fourth connection was served in %s", time.Since(start).Round(time.Millisecond))
	assert.True(t, c2.closedWithin(5*time.Second), "the connection idle longest must be closed")
	for i, c := range []*conn{c1, c3} {
		res, _, err := c.tryGet("/")
		if assert.NoError(t, err, "connection %d", i) {
			assert.Equal(t, http.StatusOK, res.StatusCode)
		}
	}
	assert.Equal(t, uint64(1), cs.limit.Reclaimed())
	assert.Equal(t, uint64(0), cs.limit.Refused())
	assert.Equal(t, 3, cs.limit.Open())
}

// TestConnLimit_RefusesWhenNoneIdle: connections serving requests are
// never reclaimed; with nothing idle, the new one is answered 503 and
// closed, and the others finish undisturbed.
func TestConnLimit_RefusesWhenNoneIdle(t *testing.T) {
	cs := startCapped(t, httpapi.ConnLimitOptions{Max: 2})
	held := []*conn{cs.dialFrom(t, "127.0.0.1"), cs.dialFrom(t, "127.0.0.1")}
	for _, c := range held {
		c.send(t, "/hold")
	}
	waitFor(t, "two requests held", func() bool { return cs.holding.Load() == 2 })

	over := cs.dialFrom(t, "127.0.0.2")
	res, body := over.get(t, "/")
	wantRefusal(t, res, body, http.StatusServiceUnavailable, "too_many_connections")
	assert.True(t, res.Close, "Connection: close")
	assert.True(t, over.closedWithin(5*time.Second))
	cs.release()
	for _, c := range held {
		res, err := http.ReadResponse(c.r, nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, res.StatusCode)
		res.Body.Close()
	}
	assert.Equal(t, uint64(1), cs.limit.Refused())
	assert.Equal(t, uint64(0), cs.limit.Reclaimed())
}

// TestConnLimit_PerAddress: one address cannot hold more than its share;
// over it, its own longest idle connection makes room, and with none
// idle it is refused 429, while another address is served.
func TestConnLimit_PerAddress(t *testing.T) {
	cs := startCapped(t, httpapi.ConnLimitOptions{Max: 100, MaxPerAddress: 2})
	a1, a2 := cs.dialFrom(t, "127.0.0.1"), cs.dialFrom(t, "127.0.0.1")
	a1.send(t, "/hold")
	a2.send(t, "/hold")
	waitFor(t, "two requests held", func() bool { return cs.holding.Load() == 2 })

	res, body := cs.dialFrom(t, "127.0.0.1").get(t, "/")
	wantRefusal(t, res, body, http.StatusTooManyRequests, "too_many_connections_from_address")
	res, body = cs.dialFrom(t, "127.0.0.2").get(t, "/")
	require.Equal(t, http.StatusOK, res.StatusCode, "another address: %s", body)

	cs.release()
	for _, c := range []*conn{a1, a2} {
		res, err := http.ReadResponse(c.r, nil)
		require.NoError(t, err)
		res.Body.Close()
	}
	waitFor(t, "the held connections to be idle", func() bool { return cs.limit.Idle() == 3 })
	a2.get(t, "/") // a1 is now the address's connection idle longest
	waitFor(t, "a2 to be idle again", func() bool { return cs.limit.Idle() == 3 })
	res, body = cs.dialFrom(t, "127.0.0.1").get(t, "/")
	require.Equal(t, http.StatusOK, res.StatusCode, "over the cap with an idle connection of its own: %s", body)
	assert.Equal(t, uint64(1), cs.limit.Reclaimed())
	assert.True(t, a1.closedWithin(5*time.Second), "the address's connection idle longest must be closed")
}

// TestConnLimit_TrustedProxy: a trusted proxy's connections are not
// capped per address; the requests it forwards count against the client
// X-Forwarded-For names (the last address in it the proxy did not add
// for itself). From an untrusted address the header means nothing.
func TestConnLimit_TrustedProxy(t *testing.T) {
	proxies, err := httpapi.ParseTrustedProxies([]string{"127.0.0.1"})
	require.NoError(t, err)
	cs := startCapped(t, httpapi.ConnLimitOptions{Max: 100, MaxPerAddress: 1, TrustedProxies: proxies})
	held := cs.dialFrom(t, "127.0.0.1")
	held.send(t, "/hold", "X-Forwarded-For: 203.0.113.7")
	waitFor(t, "the request held", func() bool { return cs.holding.Load() == 1 })

	for _, tc := range []struct {
		xff  string
		want int
	}{
		{"203.0.113.7", http.StatusTooManyRequests},            // the client with a request in flight
		{"203.0.113.7, 127.0.0.1", http.StatusTooManyRequests}, // the same client through two trusted hops
		{"203.0.113.7, 198.51.100.1", http.StatusOK},           // the last untrusted hop is the client
		{"203.0.113.8", http.StatusOK},                         // another client
		{"unknown", http.StatusOK},                             // unreadable: counted as the proxy's own address
		{"2001:db8:1:2::7", http.StatusOK},                     // an IPv6 client
	} {
		res, body := cs.dialFrom(t, "127.0.0.1").get(t, "/", "X-Forwarded-For: "+tc.xff)
		assert.Equal(t, tc.want, res.StatusCode, "X-Forwarded-For: %s: %s", tc.xff, body)
	}

	// From an address that is no trusted proxy, X-Forwarded-For is the
	// client's word: its connections count against its own address.
	spoof := cs.dialFrom(t, "127.0.0.2")
	spoof.send(t, "/hold", "X-Forwarded-For: 203.0.113.50")
	waitFor(t, "the untrusted request held", func() bool { return cs.holding.Load() == 2 })
	res, body := cs.dialFrom(t, "127.0.0.2").get(t, "/", "X-Forwarded-For: 203.0.113.51")
	wantRefusal(t, res, body, http.StatusTooManyRequests, "too_many_connections_from_address")
}

// TestConnLimit_FirstRequestTimeout: a connection that has not sent its
// first request line and headers within FirstRequestTimeout is closed,
// though the server's ReadHeaderTimeout is far longer; one that has, and
// then idles, is kept for the idle timeout.
func TestConnLimit_FirstRequestTimeout(t *testing.T) {
	cs := startCapped(t, httpapi.ConnLimitOptions{Max: 100, FirstRequestTimeout: 300 * time.Millisecond})
	silent := cs.dialFrom(t, "127.0.0.1")
	partial := cs.dialFrom(t, "127.0.0.1")
	_, err := io.WriteString(partial, "GET / HTTP/1.1\r\nHost: kerneld\r\n")
	require.NoError(t, err)
	served := cs.dialFrom(t, "127.0.0.1")
	served.get(t, "/")

	for name, c := range map[string]*conn{"silent": silent, "partial headers": partial} {
		start := time.Now()
		assert.True(t, c.closedWithin(5*time.Second), "%s connection still open 5 s later (ReadHeaderTimeout is 10 s)", name)
		t.Logf("%s connection closed after %s", name, time.Since(start).Round(time.Millisecond))
	}
	assert.False(t, served.closedWithin(600*time.Millisecond), "a served connection idle for twice the timeout was closed")
	res, body := served.get(t, "/")
	assert.Equal(t, http.StatusOK, res.StatusCode, body)
}

// TestConnLimit_LogsAtBoundedRate: a flood of refusals and reclaims is
// logged in a line or two with the totals, never a line each, and never
// at ERROR.
func TestConnLimit_LogsAtBoundedRate(t *testing.T) {
	cs := startCapped(t, httpapi.ConnLimitOptions{Max: 1, MaxPerAddress: 1})
	idle := cs.dialFrom(t, "127.0.0.1")
	idle.get(t, "/")
	waitFor(t, "one idle connection", func() bool { return cs.limit.Idle() == 1 })
	for i := range 20 { // each takes the place of the one before
		res, body := cs.dialFrom(t, "127.0.0.1").get(t, "/")
		require.Equal(t, http.StatusOK, res.StatusCode, "connection %d: %s", i, body)
		waitFor(t, "the connection to be idle", func() bool { return cs.limit.Idle() == 1 })
	}
	cs.dialFrom(t, "127.0.0.1").send(t, "/hold")
	waitFor(t, "the request held", func() bool { return cs.holding.Load() == 1 })
	for range 20 {
		res, body := cs.dialFrom(t, "127.0.0.2").get(t, "/")
		wantRefusal(t, res, body, http.StatusServiceUnavailable, "too_many_connections")
	}
	logs := cs.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "closing the longest idle connections"), logs)
	assert.Equal(t, 1, strings.Count(logs, "refusing connections"), logs)
	assert.NotContains(t, logs, "level=ERROR")
	assert.Equal(t, uint64(21), cs.limit.Reclaimed())
	assert.Equal(t, uint64(20), cs.limit.Refused())
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := httpapi.ParseTrustedProxies([]string{"10.0.0.5", "10.1.0.0/16", "::1", "fd00::/8", "10.2.3.4/8"})
	require.NoError(t, err)
	want := []string{"10.0.0.5/32", "10.1.0.0/16", "::1/128", "fd00::/8", "10.0.0.0/8"}
	for i, p := range got {
		assert.Equal(t, netip.MustParsePrefix(want[i]), p)
	}
	for _, bad := range []string{"", "proxy.local", "10.0.0.0/33", "10.0.0.1:80"} {
		_, err := httpapi.ParseTrustedProxies([]string{bad})
		assert.Error(t, err, "%q", bad)
	}
}

// lockedBuffer is a bytes.Buffer a logger and a test may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
