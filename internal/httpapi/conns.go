package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// ConnLimit caps the connections a listener keeps open, idle keep-alive
// connections included, so that clients cannot take every file descriptor
// the process has. A connection over the cap is still accepted, answered
// 503 with Retry-After and closed: left in the listen backlog instead, its
// client would wait for a timeout and learn nothing. Answering takes a
// descriptor for a moment, so the cap must sit below the descriptor limit
// with headroom for at least MaxRefusing of them; beyond that many at
// once, excess connections are closed unanswered.
//
// Use all three parts: Listener for http.Server.Serve, ConnContext as
// http.Server.ConnContext, Handler around the server's handler.
type ConnLimit struct {
	opts     ConnLimitOptions
	s        *Server // writes the 503
	open     atomic.Int64
	refusing atomic.Int64
	refused  atomic.Uint64
	lastLog  atomic.Int64 // unix nanoseconds of the last "connection limit reached" line
}

// ConnLimitOptions configure a ConnLimit. Zero values take the defaults
// noted.
type ConnLimitOptions struct {
	Max           int           // open connections; required
	MaxRefusing   int           // connections being answered 503 at once; default 64
	RefuseTimeout time.Duration // how long a refused client has to send its request; default 1 s
	RetryAfter    time.Duration // the Retry-After of the 503; default 1 s
	Logger        *slog.Logger
}

// refusedLogEvery bounds how often a flood of refused connections is
// logged.
const refusedLogEvery = 10 * time.Second

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
	return &ConnLimit{opts: opts, s: &Server{log: opts.Logger}}
}

// Open returns the number of connections open under the cap.
func (l *ConnLimit) Open() int { return int(l.open.Load()) }

// Refused returns how many connections were refused since the start.
func (l *ConnLimit) Refused() uint64 { return l.refused.Load() }

// Listener returns ln with the cap applied to the connections it accepts.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

type overCapKey struct{}

// ConnContext marks the context of a connection over the cap, for Handler.
func (l *ConnLimit) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if _, ok := c.(*refusedConn); ok {
		return context.WithValue(ctx, overCapKey{}, true)
	}
	return ctx
}

// Handler answers every request on a connection over the cap with 503
// too_many_connections and closes the connection; other requests go to
// next.
func (l *ConnLimit) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(overCapKey{}) == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(l.opts.RetryAfter/time.Second)))
		w.Header().Set("Connection", "close")
		l.s.writeError(w, r, errdefs.New(errdefs.ErrUnavailable, "too_many_connections",
			"kerneld holds %d open connections, the most it keeps; retry later", l.opts.Max))
	})
}

// limitListener applies a ConnLimit to the connections it accepts.
type limitListener struct {
	net.Listener
	l *ConnLimit
}

// Accept returns the next connection: counted under the cap, or marked
// to be refused, or (when too many are being refused already) it closes
// the connection at once and accepts the next.
func (ln *limitListener) Accept() (net.Conn, error) {
	l := ln.l
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= int64(l.opts.Max) {
			return &countedConn{Conn: c, count: &l.open}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		l.logRefusal()
		if l.refusing.Add(1) > int64(l.opts.MaxRefusing) {
			l.refusing.Add(-1)
			_ = c.Close() // nothing to report to: the client sees the connection closed
			continue
		}
		return newRefusedConn(c, &l.refusing, l.opts.RefuseTimeout), nil
	}
}

// logRefusal logs that the cap is reached, at most every refusedLogEvery.
func (l *ConnLimit) logRefusal() {
	now, last := time.Now().UnixNano(), l.lastLog.Load()
	if now-last < int64(refusedLogEvery) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.opts.Logger.Warn("connection limit reached: refusing connections", "max_connections", l.opts.Max,
		"refused_total", l.refused.Load())
}

// countedConn gives its place under the cap back when it is closed.
type countedConn struct {
	net.Conn
	count  *atomic.Int64
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.count.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close the connection after a response
// whose request body it did not read (a 408), so that the client reads
// the response instead of a reset.
func (c *countedConn) CloseWrite() error { return closeWrite(c.Conn) }

// refusedConn is a connection over the cap: it lives RefuseTimeout at
// most, whatever deadlines net/http sets, and frees its place among the
// connections being refused when closed.
type refusedConn struct {
	countedConn
	deadline time.Time
}

func newRefusedConn(c net.Conn, count *atomic.Int64, timeout time.Duration) *refusedConn {
	rc := &refusedConn{countedConn: countedConn{Conn: c, count: count}, deadline: time.Now().Add(timeout)}
	_ = c.SetDeadline(rc.deadline) // a failure shows on the first read
	return rc
}

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
