package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
)

// retryStreamsAfter is the Retry-After of a refused stream, in seconds:
// slots free up when other streams end, which cannot be predicted.
const retryStreamsAfter = 5

// paceBody holds a request body to the read timeout and to a minimum
// rate: a body slower than Options.MinBodyRate once Options.BodyRateGrace
// has passed, or still arriving at Options.ReadTimeout, is cut off and
// answered 408. It works through the connection's read deadline, moved
// ahead before every read, so a body that stalls is caught without a
// goroutine or a timer.
//
// Once the request is read (at once for a request without a body), the
// read deadline is cleared: past that point net/http only reads to notice
// a client that leaves, and a read deadline passing then would cancel the
// request's context, ending a long event stream mid-way. (The net/http of
// Go 1.26 clears it too when it starts that read; streams do not depend
// on it, nor on the deadlines set here being gone.)
func (s *Server) paceBody(next http.Handler) http.Handler {
	if s.opts.ReadTimeout <= 0 && s.opts.MinBodyRate <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body == nil || r.Body == http.NoBody {
			_ = rc.SetReadDeadline(time.Time{}) // unsupported: the server's deadline stays, nothing worse
			next.ServeHTTP(w, r)
			return
		}
		b := &pacedBody{ReadCloser: r.Body, rc: rc, start: time.Now(), rate: s.opts.MinBodyRate, grace: s.opts.BodyRateGrace}
		if s.opts.ReadTimeout > 0 {
			b.end = b.start.Add(s.opts.ReadTimeout)
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// pacedBody is a request body read under paceBody's deadlines. One
// goroutine reads it, as with any request body.
type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	end   time.Time // the read timeout; zero for none
	rate  int64     // bytes per second; 0 for no minimum
	grace time.Duration
	n     int64 // bytes read so far
	done  bool  // read to the end: no deadline any more
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	deadline := b.deadline()
	_ = b.rc.SetReadDeadline(deadline) // unsupported: the server's read timeout still applies
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if errors.Is(err, io.EOF) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return n, b.tooSlow(deadline)
	}
	return n, err
}

// deadline is when the next byte must have arrived: by the read timeout,
// and in time to keep the body at the minimum rate after the grace.
func (b *pacedBody) deadline() time.Time {
	d := b.end
	if b.rate > 0 {
		next := b.start.Add(b.grace + time.Duration((b.n+1)*int64(time.Second)/b.rate))
		if d.IsZero() || next.Before(d) {
			d = next
		}
	}
	return d
}

// tooSlow says which bound the body missed.
func (b *pacedBody) tooSlow(deadline time.Time) error {
	if !b.end.IsZero() && !deadline.Before(b.end) {
		return errdefs.New(errRequestTimeout, errdefs.CodeBodyTooSlow,
			"the request body was not read within the read timeout (%s): %d bytes arrived", b.end.Sub(b.start), b.n)
	}
	return errdefs.New(errRequestTimeout, errdefs.CodeBodyTooSlow,
		"the request body arrived slower than %d bytes/s: %d bytes in %s", b.rate, b.n, time.Since(b.start).Round(time.Millisecond))
}

// streamSlots counts the open event streams, per tenant and in all, so
// that no tenant, and not all of them together, can hold every
// connection kerneld may keep. Zero limits are no limit.
type streamSlots struct {
	max, perTenant int

	mu       sync.Mutex
	total    int
	byTenant map[string]int
}

func newStreamSlots(max, perTenant int) *streamSlots {
	return &streamSlots{max: max, perTenant: perTenant, byTenant: make(map[string]int)}
}

// acquire takes a slot for tenant, or says which limit is reached: the
// tenant's own first (429: it holds its share), then the total (503).
func (l *streamSlots) acquire(tenant string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perTenant > 0 && l.byTenant[tenant] >= l.perTenant {
		return errdefs.New(errdefs.ErrExhausted, errdefs.CodeTooManyStreams,
			"this tenant has %d open event streams, the most it may have; close one or retry later", l.byTenant[tenant])
	}
	if l.max > 0 && l.total >= l.max {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStreamsUnavailable,
			"kerneld holds %d open event streams, the most it serves; retry later", l.total)
	}
	l.total++
	l.byTenant[tenant]++
	return nil
}

// of returns how many streams tenant has open.
func (l *streamSlots) of(tenant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byTenant[tenant]
}

func (l *streamSlots) release(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byTenant[tenant]--; l.byTenant[tenant] == 0 {
		delete(l.byTenant, tenant)
	}
}

// limitStreams wraps a route that may answer with an event stream: a
// request that asks for one takes a stream slot for as long as it is
// served, or is refused with a problem before any event is written.
func (s *Server) limitStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !wantsStream(r) {
			next.ServeHTTP(w, r)
			return
		}
		tenant := kernel.TenantFrom(r.Context())
		if err := s.slots.acquire(tenant); err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(retryStreamsAfter))
			s.writeError(w, r, err)
			return
		}
		defer s.slots.release(tenant)
		next.ServeHTTP(w, r)
	})
}

// wantsStream reports whether a request to a stream route asks for the
// stream: GET /sessions/{id}/events unless it asks for a JSON page, POST
// /sessions/{id}/run when it accepts text/event-stream.
func wantsStream(r *http.Request) bool {
	if r.Method == http.MethodGet {
		return !wantsEventPage(r)
	}
	return accepts(r, "text/event-stream")
}
