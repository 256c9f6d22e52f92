package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// floodConns is how many idle connections one client opens in the flood
// tests: 20,000, or as many as this process's descriptor limit allows
// with room for the rest of the test.
func floodConns(t *testing.T) int {
	t.Helper()
	const want, spare = 20000, 500
	limit, err := raiseFileLimit()
	if err != nil {
		t.Fatalf("descriptor limit: %v", err)
	}
	n := min(want, int(limit)-spare)
	if n < want {
		t.Logf("the descriptor limit of this process is %d: opening %d idle connections instead of %d", limit, n, want)
	}
	if n < 2000 {
		t.Skipf("the descriptor limit (%d) leaves too few connections for a flood", limit)
	}
	return n
}

// startShipped runs the kerneld binary with the shipped configs/kerneld.yaml
// (only the address, the data directory and any http: lines given
// changed), and waits until it is ready.
func startShipped(t *testing.T, extra ...string) *process {
	t.Helper()
	return startBinary(t, append([]string{"-config", "../../configs/kerneld.yaml", "-addr", "127.0.0.1:0",
		"-agents-dir", "../../configs/agents", "-data-dir", t.TempDir()}, extra...)...)
}

// servedWithin connects from the loopback address from, asks for path,
// and fails the test unless it is answered 200 within d.
func servedWithin(t *testing.T, p *process, from, path string, d time.Duration) {
	t.Helper()
	start := time.Now()
	dialer := net.Dialer{Timeout: d, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := dialer.Dial("tcp", p.addr())
	if err != nil {
		t.Fatalf("a new client from %s could not connect: %v", from, err)
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(d))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: kerneld\r\n\r\n", path); err != nil {
		t.Fatalf("a new client from %s: %v", from, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a new client from %s got no answer within %s: %v", from, d, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a new client from %s: GET %s = %d, want 200", from, path, res.StatusCode)
	}
	t.Logf("a new client from %s was served in %s", from, time.Since(start).Round(time.Millisecond))
}

// TestProcess_IdleFloodShippedDefaults: one client opens 20,000
// keep-alive connections to kerneld on the shipped configuration and
// leaves them idle. Every one of them is answered, kerneld keeps no more
// of them than one address may hold, and a new client, from that address
// or another, is served within a second.
func TestProcess_IdleFloodShippedDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	n := floodConns(t)
	p := startShipped(t)
	start := time.Now()
	openIdle(t, p, n)
	t.Logf("%d idle connections opened and answered in %s", n, time.Since(start).Round(time.Millisecond))
	servedWithin(t, p, "127.0.0.1", "/agents", time.Second)
	servedWithin(t, p, "127.0.0.2", "/agents", time.Second)
	if fds, most := p.openFDs(), DefaultConfig().HTTP.MaxConnectionsPerAddress+200; fds > most {
		t.Errorf("kerneld holds %d descriptors, want at most %d: one address's share and the rest", fds, most)
	} else {
		t.Logf("kerneld holds %d descriptors", fds)
	}
}

// TestProcess_IdleFloodAtTotalCap: with no cap per address, idle
// connections past max_connections do not lock anyone out: the longest
// idle are closed to serve new ones.
func TestProcess_IdleFloodAtTotalCap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const limit = 2000
	p := startLimited(t, fmt.Sprintf("  max_connections: %d\n  max_connections_per_address: 0\n", limit))
	openIdle(t, p, 2*limit)
	servedWithin(t, p, "127.0.0.1", "/healthz", time.Second)
	servedWithin(t, p, "127.0.0.2", "/healthz", time.Second)
	if got := metric(t, p.base, "kerneld_connections_reclaimed_total"); got < limit {
		t.Errorf("kerneld_connections_reclaimed_total = %v, want at least %d", got, limit)
	}
}
