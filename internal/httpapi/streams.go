package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/r3labs/sse/v2"

	"github.com/kerneld/kerneld/internal/session"
)

// Stream tuning. The buffer bounds what a subscriber may fall behind by
// before it is dropped (it then resumes from the log), so it bounds memory.
const (
	defaultHeartbeat    = 15 * time.Second
	defaultWriteTimeout = 10 * time.Second
	streamBuffer        = 256
	backlogPage         = 1000
	retryLine           = "retry: 2000\n\n"
)

// eventReader reads a session, its runs and its event log; the kernel
// implements it.
type eventReader interface {
	GetSession(ctx context.Context, id string) (session.Session, error)
	GetRun(ctx context.Context, sessionID, runID string) (session.Run, error)
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error)
}

// Streams is the SSE hub: it delivers every event the kernel emits to the
// open streams of its session. It implements kernel.Observer.
//
// It is built on github.com/r3labs/sse/v2, used with one r3labs stream per
// connection rather than per session: the library delivers to a stream's
// subscribers with blocking sends, so a shared stream would let one stuck
// client stall every other client of the session. Events reach a stream
// with TryPublish, so a run never waits for a client; a stream that cannot
// take an event is dropped and its client resumes from the log. Replay,
// de-duplication, gap filling and the end of a stream are handled by
// frameWriter, which sits between r3labs and the connection.
type Streams struct {
	sse  *sse.Server
	log  *slog.Logger
	opts StreamOptions

	mu      sync.RWMutex
	streams map[string]map[*stream]struct{} // by session id
	closed  bool

	nextKey   atomic.Uint64
	stop      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the heartbeat goroutine
}

// stream is one open SSE connection.
type stream struct {
	key       string // r3labs stream id
	sessionID string
	runID     string // when set, only this run's events, ending after its end
	cancel    context.CancelFunc

	mu       sync.Mutex
	sent     int64 // highest seq delivered
	hasEnd   bool  // the stream's last seq is known:
	endAfter int64 // end once sent reaches it
}

// StreamOptions tune the hub. Zero values take the defaults noted.
type StreamOptions struct {
	// Heartbeat is how often an idle stream gets ": ping"; default 15 s.
	Heartbeat time.Duration
	// WriteTimeout is how long a client may take to accept one write
	// before it counts as gone; default 10 s.
	WriteTimeout time.Duration
}

// NewStreams returns a hub. Close stops it.
func NewStreams(log *slog.Logger, opts StreamOptions) *Streams {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	srv := sse.New()
	srv.AutoReplay = false // replay comes from the durable log, never from r3labs' unbounded memory
	srv.AutoStream = false
	srv.BufferSize = streamBuffer
	srv.Headers = map[string]string{"X-Accel-Buffering": "no"} // r3labs sets Content-Type and Cache-Control itself
	s := &Streams{sse: srv, log: log, opts: opts, streams: make(map[string]map[*stream]struct{}), stop: make(chan struct{})}
	s.wg.Go(s.pingLoop)
	return s
}

// Close ends every open stream promptly and stops the heartbeat. New
// streams are refused afterwards. It is safe to call more than once.
func (s *Streams) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for _, set := range s.streams {
			for st := range set {
				st.cancel()
			}
		}
		s.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
	})
}

// Open returns the number of open streams.
func (s *Streams) Open() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, set := range s.streams {
		n += len(set)
	}
	return n
}

// ObserveEvents implements kernel.Observer: it offers the events to every
// stream of their session without blocking.
func (s *Streams) ObserveEvents(evs []session.Event) {
	if len(evs) == 0 {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	set := s.streams[evs[0].SessionID]
	if len(set) == 0 {
		return
	}
	frames := make([]*sse.Event, len(evs)) // encoded once, shared read-only by every stream
	for i := range evs {
		frames[i] = &sse.Event{
			ID:    appendFrameID(nil, &evs[i]),
			Event: []byte(evs[i].Type),
			Data:  evs[i].AppendJSON(nil),
		}
	}
	for st := range set {
		for _, f := range frames {
			if !s.sse.TryPublish(st.key, f) {
				s.log.Info("stream dropped: subscriber too slow", "session", st.sessionID)
				st.cancel()
				break
			}
		}
	}
}

// ObserveSessionEnded implements kernel.Observer: the session's streams
// end once they have delivered lastSeq.
func (s *Streams) ObserveSessionEnded(sessionID string, lastSeq int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for st := range s.streams[sessionID] {
		if st.setEnd(lastSeq) {
			st.cancel()
		}
	}
}

// pingLoop sends a comment on every stream at each heartbeat, so proxies
// keep quiet streams open and dead peers are found by the failed write.
func (s *Streams) pingLoop() {
	t := time.NewTicker(s.opts.Heartbeat)
	defer t.Stop()
	ping := &sse.Event{Comment: []byte("ping")}
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.RLock()
		for _, set := range s.streams {
			for st := range set {
				if !s.sse.TryPublish(st.key, ping) {
					st.cancel()
				}
			}
		}
		s.mu.RUnlock()
	}
}

// add registers st to receive its session's events. A hub that is closing
// ends st at once.
func (s *Streams) add(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		st.cancel()
		return
	}
	set := s.streams[st.sessionID]
	if set == nil {
		set = make(map[*stream]struct{})
		s.streams[st.sessionID] = set
	}
	set[st] = struct{}{}
}

func (s *Streams) remove(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set := s.streams[st.sessionID]; set != nil {
		delete(set, st)
		if len(set) == 0 {
			delete(s.streams, st.sessionID)
		}
	}
}

// streamRequest is what one SSE response should carry.
type streamRequest struct {
	sessionID string
	after     int64  // deliver events with seq > after
	runID     string // only this run's events; the stream ends after its end
}

// serve streams a session's events to w: the backlog after req.after from
// the log, then live events, until the client leaves, the stream ends or
// is dropped, or the hub closes.
func (s *Streams) serve(w http.ResponseWriter, r *http.Request, log eventReader, req streamRequest) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := &stream{
		key:       "c" + strconv.FormatUint(s.nextKey.Add(1), 10),
		sessionID: req.sessionID, runID: req.runID, cancel: cancel,
		sent: req.after,
	}
	s.sse.CreateStream(st.key)
	// RemoveStream only after ServeHTTP has returned: by then r3labs has
	// deregistered the subscriber, so its goroutines cannot leak.
	defer s.sse.RemoveStream(st.key)
	defer s.remove(st)
	fw := &frameWriter{w: w, rc: http.NewResponseController(w), hub: s, st: st, log: log, ctx: ctx}
	s.sse.ServeHTTP(fw, r3labsRequest(r.WithContext(ctx), st.key))
}

// r3labsRequest returns r as r3labs expects it: the stream named in the
// query, and no Last-Event-ID (kerneld already resolved the cursor, and
// r3labs would reject ids it cannot parse).
func r3labsRequest(r *http.Request, key string) *http.Request {
	u := *r.URL
	u.RawQuery = "stream=" + key
	r.URL = &u
	r.Header = r.Header.Clone()
	r.Header.Del("Last-Event-ID")
	return r
}

// setEnd records that the stream ends after seq and reports whether it has
// already delivered it.
func (st *stream) setEnd(seq int64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.hasEnd || seq < st.endAfter {
		st.hasEnd, st.endAfter = true, seq
	}
	return st.sent >= st.endAfter
}

// delivered records that seq was delivered and reports whether the stream
// should now end.
func (st *stream) delivered(seq int64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sent = max(st.sent, seq)
	return st.hasEnd && st.sent >= st.endAfter
}

// finished reports whether the stream has delivered its last event.
func (st *stream) finished() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hasEnd && st.sent >= st.endAfter
}

func (st *stream) lastSent() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sent
}
