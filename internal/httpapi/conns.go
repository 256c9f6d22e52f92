package httpapi

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimit shares a listener's connections fairly, so that no client can
// take the descriptors or the slots the others need:
//
//   - It caps the connections kept open (Max), idle keep-alive ones
//     included, and those of one client address (MaxPerAddress).
//   - At a cap it first reclaims the connection of the cap's scope (all,
//     or that address's) that has been idle longest, and serves the new
//     one in its place: a server may close an idle keep-alive connection
//     at any time (RFC 9112 §9.8), which costs its client a reconnect,
//     whereas a refusal costs a newcomer its request. So a client holding
//     thousands of idle connections pushes out its own idle connections,
//     and the oldest of everyone's, never a request being served.
//   - Only when nothing in the scope is idle is the new connection
//     refused: it is still accepted, answered (503 too_many_connections
//     over Max, 429 too_many_connections_from_address over MaxPerAddress)
//     with Retry-After, and closed, since left in the listen backlog its
//     client would learn nothing. Answering takes a descriptor for a
//     moment, so Max must sit below the descriptor limit with headroom for
//     MaxRefusing of them; beyond that many at once, excess connections
//     are closed unanswered.
//   - A new connection must deliver its first request's line and headers
//     within FirstRequestTimeout, whatever the server's own timeouts.
//   - Behind a reverse proxy every connection comes from the proxy: those
//     from TrustedProxies are not capped per address; instead each request
//     on them counts, while it is served, against the address the proxy
//     forwards (X-Forwarded-For).
//   - Refusals and reclaims are counted and logged at a bounded rate,
//     never once per connection.
//
// Use all four parts (Install does): Listener for http.Server.Serve,
// ConnState and ConnContext as the server's hooks, Handler around its
// handler.
type ConnLimit struct {
	opts ConnLimitOptions

	mu     sync.Mutex
	all    connPool
	byAddr map[netip.Addr]*connPool // by client address; only with MaxPerAddress

	refusing  atomic.Int64
	refused   atomic.Uint64
	reclaimed atomic.Uint64
	logs      pressureLogs
}

// ConnLimitOptions configure a ConnLimit. Zero values take the defaults
// noted.
type ConnLimitOptions struct {
	Max int // open connections; required
	// MaxPerAddress caps the open connections of one client address (an
	// IPv6 client's /64), and the requests in flight forwarded for one by
	// a trusted proxy; 0 for no cap.
	MaxPerAddress int
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client.
	TrustedProxies []netip.Prefix
	// FirstRequestTimeout bounds how long a new connection may take to
	// send its first request line and headers; 0 leaves it to the
	// server's ReadHeaderTimeout.
	FirstRequestTimeout time.Duration
	MaxRefusing         int           // connections being answered a refusal at once; default 64
	RefuseTimeout       time.Duration // how long a refused client has to send its request; default 1 s
	RetryAfter          time.Duration // the Retry-After of a refusal; default 1 s
	Logger              *slog.Logger
}

// NewConnLimit returns a connection cap.
func NewConnLimit(opts ConnLimitOptions) *ConnLimit {
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	if opts.MaxRefusing <= 0 {
		opts.MaxRefusing = 64
	}
	if opts.RefuseTimeout <= 0 {
		opts.RefuseTimeout = time.Second
	}
	if opts.RetryAfter < time.Second {
		opts.RetryAfter = time.Second
	}
	return &ConnLimit{opts: opts, byAddr: make(map[netip.Addr]*connPool)}
}

// Install wires l into srv, whose Handler must be set: its listener must
// still be wrapped with Listener.
func (l *ConnLimit) Install(srv *http.Server) {
	srv.Handler = l.Handler(srv.Handler)
	srv.ConnContext = l.ConnContext
	srv.ConnState = l.ConnState
}

// Open returns the number of connections open under the cap.
func (l *ConnLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.n
}

// Idle returns the number of open connections waiting for a request
// between two (keep-alive), which a cap may reclaim.
func (l *ConnLimit) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.idle.Len()
}

// Refused returns how many connections (and forwarded requests) were
// refused since the start.
func (l *ConnLimit) Refused() uint64 { return l.refused.Load() }

// Reclaimed returns how many idle connections were closed at a cap to
// serve a new one.
func (l *ConnLimit) Reclaimed() uint64 { return l.reclaimed.Load() }

// Listener returns ln with the caps applied to the connections it accepts.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

// connPool is the connections of one scope (all of them, or one
// address's): how many there are, and the idle ones, longest idle first.
type connPool struct {
	n    int
	idle list.List // of *trackedConn
}

// trackedConn is a connection counted under the caps. Its place in the
// idle lists is guarded by ConnLimit.mu.
type trackedConn struct {
	net.Conn
	l       *ConnLimit
	addr    netip.Addr // its key in byAddr; invalid when no address cap counts it
	proxied bool       // from a trusted proxy
	// firstBy is when a new connection's first request line and headers
	// must have arrived; reads are held to it while waiting holds.
	firstBy time.Time
	waiting atomic.Bool

	gone     bool          // no longer counted: closed or reclaimed
	allIdle  *list.Element // in all.idle while idle
	addrIdle *list.Element // in byAddr[addr].idle while idle
}

// limitListener applies a ConnLimit to the connections it accepts.
type limitListener struct {
	net.Listener
	l *ConnLimit
}

// Accept returns the next connection: counted under the caps (after
// reclaiming an idle one if a cap is reached), or marked to be refused,
// or (when too many are being refused already) it closes the connection
// at once and accepts the next.
func (ln *limitListener) Accept() (net.Conn, error) {
	l := ln.l
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc, victim, refusal := l.admit(c)
		if victim != nil {
			l.reclaim(victim, refusal)
		}
		if tc != nil {
			return tc, nil
		}
		l.refused.Add(1)
		l.logs.note(l.opts.Logger, refusal, false, l)
		if l.refusing.Add(1) > int64(l.opts.MaxRefusing) {
			l.refusing.Add(-1)
			_ = c.Close() // nothing to report to: the client sees the connection closed
			continue
		}
		return newRefusedConn(c, &l.refusing, l.opts.RefuseTimeout, refusal), nil
	}
}

// admit counts c under the caps and returns it tracked, with the idle
// connection it takes the place of, if a cap was reached; or, if nothing
// was idle, nil and the cap that refuses it.
func (l *ConnLimit) admit(c net.Conn) (tc, victim *trackedConn, cap connCap) {
	tc = &trackedConn{Conn: c, l: l}
	addr, proxied := l.remoteKey(c.RemoteAddr())
	tc.proxied = proxied
	l.mu.Lock()
	defer l.mu.Unlock()
	var pool *connPool
	if l.opts.MaxPerAddress > 0 && !proxied && addr.IsValid() {
		tc.addr, pool = addr, l.poolLocked(addr)
		if pool.n >= l.opts.MaxPerAddress {
			if victim, cap = oldestIdle(pool), capAddress; victim == nil {
				l.dropPoolLocked(addr, pool)
				return nil, nil, capAddress
			}
		}
	}
	if victim == nil && l.all.n >= l.opts.Max {
		if victim, cap = oldestIdle(&l.all), capTotal; victim == nil {
			l.dropPoolLocked(addr, pool)
			return nil, nil, capTotal
		}
	}
	if victim != nil {
		l.forgetLocked(victim) // which may drop the pool it was the last of
	}
	l.all.n++
	if tc.addr.IsValid() {
		l.poolLocked(tc.addr).n++
	}
	if l.opts.FirstRequestTimeout > 0 {
		tc.firstBy = time.Now().Add(l.opts.FirstRequestTimeout)
		tc.waiting.Store(true)
		_ = c.SetReadDeadline(tc.firstBy) // a failure shows on the first read
	}
	return tc, victim, cap
}

// oldestIdle returns the pool's connection idle longest, or nil.
func oldestIdle(p *connPool) *trackedConn {
	if e := p.idle.Front(); e != nil {
		return e.Value.(*trackedConn)
	}
	return nil
}

// reclaim closes victim, already uncounted, for a new connection at cap.
func (l *ConnLimit) reclaim(victim *trackedConn, cap connCap) {
	l.reclaimed.Add(1)
	l.logs.note(l.opts.Logger, cap, true, l)
	_ = victim.Conn.Close() // its server goroutine sees the read fail and ends
}

// poolLocked returns addr's pool, creating it.
func (l *ConnLimit) poolLocked(addr netip.Addr) *connPool {
	p := l.byAddr[addr]
	if p == nil {
		p = &connPool{}
		l.byAddr[addr] = p
	}
	return p
}

// dropPoolLocked removes addr's pool once it counts nothing.
func (l *ConnLimit) dropPoolLocked(addr netip.Addr, p *connPool) {
	if p != nil && p.n == 0 && l.byAddr[addr] == p {
		delete(l.byAddr, addr)
	}
}

// forgetLocked stops counting tc: it is closed, or about to be.
func (l *ConnLimit) forgetLocked(tc *trackedConn) {
	if tc.gone {
		return
	}
	tc.gone = true
	l.unidleLocked(tc)
	l.all.n--
	if p := l.byAddr[tc.addr]; tc.addr.IsValid() && p != nil {
		p.n--
		l.dropPoolLocked(tc.addr, p)
	}
}

// unidleLocked takes tc off the idle lists.
func (l *ConnLimit) unidleLocked(tc *trackedConn) {
	if tc.allIdle != nil {
		l.all.idle.Remove(tc.allIdle)
		tc.allIdle = nil
	}
	if tc.addrIdle != nil {
		if p := l.byAddr[tc.addr]; p != nil {
			p.idle.Remove(tc.addrIdle)
		}
		tc.addrIdle = nil
	}
}

// ConnState follows each connection's state for the caps: an idle one
// joins the back of the idle lists, one serving a request leaves them.
func (l *ConnLimit) ConnState(c net.Conn, state http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		tc.waiting.Store(false) // its first request's headers are in
		l.mu.Lock()
		l.unidleLocked(tc)
		l.mu.Unlock()
	case http.StateIdle:
		l.mu.Lock()
		if !tc.gone {
			l.unidleLocked(tc)
			tc.allIdle = l.all.idle.PushBack(tc)
			if p := l.byAddr[tc.addr]; tc.addr.IsValid() && p != nil {
				tc.addrIdle = p.idle.PushBack(tc)
			}
		}
		l.mu.Unlock()
	case http.StateHijacked: // no longer the server's to reclaim; counted until closed
		l.mu.Lock()
		l.unidleLocked(tc)
		l.mu.Unlock()
	case http.StateClosed:
		l.release(tc)
	}
}

// release stops counting tc.
func (l *ConnLimit) release(tc *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetLocked(tc)
}

// Close gives tc's place under the caps back and closes it.
func (tc *trackedConn) Close() error {
	tc.l.release(tc)
	return tc.Conn.Close()
}

// CloseWrite lets net/http half-close the connection after a response
// whose request body it did not read (a 408), so that the client reads
// the response instead of a reset.
func (tc *trackedConn) CloseWrite() error { return closeWrite(tc.Conn) }

// SetDeadline and SetReadDeadline hold reads of a new connection to its
// first request's deadline.
func (tc *trackedConn) SetDeadline(t time.Time) error {
	return tc.Conn.SetDeadline(tc.firstRequestBound(t))
}

func (tc *trackedConn) SetReadDeadline(t time.Time) error {
	return tc.Conn.SetReadDeadline(tc.firstRequestBound(t))
}

func (tc *trackedConn) firstRequestBound(t time.Time) time.Time {
	if tc.waiting.Load() && (t.IsZero() || t.After(tc.firstBy)) {
		return tc.firstBy
	}
	return t
}

type connKey struct{}

// ConnContext records the connection in its context, for Handler.
func (l *ConnLimit) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}
