package httpapi

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// connCap names the cap a connection or request met.
type connCap int

const (
	capTotal   connCap = iota // ConnLimitOptions.Max
	capAddress                // ConnLimitOptions.MaxPerAddress
)

// Handler answers every request on a connection refused at a cap, and
// every request a trusted proxy forwards for a client over its address's
// cap, with the refusal; other requests go to next.
func (l *ConnLimit) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch c := r.Context().Value(connKey{}).(type) {
		case *refusedConn:
			w.Header().Set("Connection", "close")
			l.refuse(w, r, c.cap)
			return
		case *trackedConn:
			if c.proxied && l.opts.MaxPerAddress > 0 {
				addr := l.forwardedFor(r, c)
				if !l.acquireForwarded(addr) {
					l.refused.Add(1)
					l.logs.note(l.opts.Logger, capAddress, false, l)
					l.refuse(w, r, capAddress)
					return
				}
				defer l.releaseForwarded(addr)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// acquireForwarded counts a request a trusted proxy forwards for addr,
// unless addr is at its cap. Nothing is reclaimed for it: the proxy's
// idle connections serve every client behind it.
func (l *ConnLimit) acquireForwarded(addr netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.poolLocked(addr)
	if p.n >= l.opts.MaxPerAddress {
		l.dropPoolLocked(addr, p)
		return false
	}
	p.n++
	return true
}

func (l *ConnLimit) releaseForwarded(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.byAddr[addr]; p != nil {
		p.n--
		l.dropPoolLocked(addr, p)
	}
}

// refuse answers a request refused at cap with its problem and
// Retry-After. It logs nothing: a flood of refusals is logged by
// pressureLogs, at a bounded rate.
func (l *ConnLimit) refuse(w http.ResponseWriter, r *http.Request, cap connCap) {
	w.Header().Set("Retry-After", strconv.Itoa(int(l.opts.RetryAfter/time.Second)))
	var err error
	if cap == capAddress {
		err = errdefs.New(errdefs.ErrExhausted, errdefs.CodeTooManyConnectionsFromAddress,
			"your address holds %d connections or requests, the most one address may; close idle ones or retry later",
			l.opts.MaxPerAddress)
	} else {
		err = errdefs.New(errdefs.ErrUnavailable, errdefs.CodeTooManyConnections,
			"kerneld holds %d open connections, the most it keeps; retry later", l.opts.Max)
	}
	writeProblem(w, r, err)
}

// pressureLogs logs that a cap is being met, at most every
// pressureLogEvery for refusals and as often for reclaims, with the
// totals so far: a flood of connections costs the log a line, not a line
// each.
type pressureLogs struct {
	lastRefusal atomic.Int64 // unix nanoseconds
	lastReclaim atomic.Int64
}

// pressureLogEvery bounds how often a flood of connections is logged.
const pressureLogEvery = 10 * time.Second

// note logs that cap refused a connection (or reclaimed one, for
// reclaimed), unless such a line was logged less than pressureLogEvery ago.
func (pl *pressureLogs) note(log *slog.Logger, cap connCap, reclaimed bool, l *ConnLimit) {
	last := &pl.lastRefusal
	if reclaimed {
		last = &pl.lastReclaim
	}
	now, prev := time.Now().UnixNano(), last.Load()
	if now-prev < int64(pressureLogEvery) || !last.CompareAndSwap(prev, now) {
		return
	}
	which := "max_connections"
	if cap == capAddress {
		which = "max_connections_per_address"
	}
	if reclaimed {
		log.Info("connection limit reached: closing the longest idle connections", "limit", which,
			"max_connections", l.opts.Max, "max_connections_per_address", l.opts.MaxPerAddress,
			"reclaimed_total", l.reclaimed.Load())
		return
	}
	log.Warn("connection limit reached: refusing connections", "limit", which,
		"max_connections", l.opts.Max, "max_connections_per_address", l.opts.MaxPerAddress,
		"refused_total", l.refused.Load())
}

// refusedConn is a connection refused at a cap: it lives RefuseTimeout at
// most, whatever deadlines net/http sets, and frees its place among the
// connections being refused when closed.
type refusedConn struct {
	net.Conn
	cap      connCap
	count    *atomic.Int64
	closed   atomic.Bool
	deadline time.Time
}

func newRefusedConn(c net.Conn, count *atomic.Int64, timeout time.Duration, cap connCap) *refusedConn {
	rc := &refusedConn{Conn: c, cap: cap, count: count, deadline: time.Now().Add(timeout)}
	_ = c.SetDeadline(rc.deadline) // a failure shows on the first read
	return rc
}

func (c *refusedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.count.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close the connection after the refusal,
// so that the client reads it instead of a reset.
func (c *refusedConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *refusedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *refusedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *refusedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

func (c *refusedConn) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(c.deadline) {
		return c.deadline
	}
	return t
}

// closeWrite half-closes c when it can.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
