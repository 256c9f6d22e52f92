package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// Stream tuning defaults; StreamOptions overrides them.
const (
	defaultHeartbeat    = 15 * time.Second
	defaultWriteTimeout = 10 * time.Second
	defaultMaxLag       = time.Minute
	defaultMaxLagEvents = 1 << 20
	defaultFeedBytes    = 4 << 20
	// maxWriteBytes bounds one write of a stream: what a stream holds of
	// its own while its client reads.
	maxWriteBytes = 256 << 10
	backlogPage   = 1000
	retryLine     = "retry: 2000\n\n"
)

// eventReader reads a session, its runs, its event log and its snapshot;
// the kernel implements it.
type eventReader interface {
	GetSession(ctx context.Context, id string) (session.Session, error)
	GetRun(ctx context.Context, sessionID, runID string) (session.Run, error)
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error)
	MessagesSnapshot(ctx context.Context, sessionID string) (kernel.Snapshot, error)
}

// Streams is the SSE hub: it delivers every event the kernel emits to the
// open streams of its session. It implements kernel.Observer.
//
// Each watched session has a feed: a window of its newest events, each
// encoded once as an SSE frame whose bytes every stream of the session
// shares. A stream is served by its own request goroutine, which writes
// whatever is ready for it in one write and one flush, then waits to be
// woken by the next append. Nothing the hub does waits for a client: the
// kernel's append only adds frames to the window and wakes the streams.
//
// A stream that falls behind the window catches up from the durable log,
// so how far a client may lag costs no memory. A client is dropped only
// when it is genuinely behind: it does not accept a write within
// WriteTimeout (it stopped reading), or it is further behind the log's
// head than MaxLagEvents events or MaxLag in time. A client that keeps up,
// however large the kernel's append batches, is never dropped.
type Streams struct {
	log    *slog.Logger
	opts   StreamOptions
	follow Follower // nil when every event is this replica's own

	mu     sync.RWMutex
	feeds  map[string]*feed // by session id, while it has streams
	closed bool

	open      atomic.Int64 // streams being served
	stop      chan struct{}
	closeOnce sync.Once
}

// StreamOptions tune the hub. Zero values take the defaults noted.
type StreamOptions struct {
	// Heartbeat is how often an idle stream gets ": ping"; default 15 s.
	Heartbeat time.Duration
	// WriteTimeout is how long a client may take to accept one write
	// before it counts as gone; default 10 s.
	WriteTimeout time.Duration
	// MaxLag drops a stream whose next event is older than this, with a
	// note telling its client to resume; default 1 minute.
	MaxLag time.Duration
	// MaxLagEvents drops a stream this many events behind the head of its
	// session's log; default 1,048,576.
	MaxLagEvents int64
	// FeedBytes bounds the frames kept per watched session for its
	// streams; a stream behind them reads the log. Default 4 MiB.
	FeedBytes int
}

// Follower brings a hub the events other replicas append to the sessions
// its streams watch, through the hub's ObserveEvents. A hub follows a
// session while it has streams.
type Follower interface {
	// Follow starts delivering session sessionID's events after seq after.
	Follow(sessionID string, after int64)
	// Unfollow stops it.
	Unfollow(sessionID string)
}

// Follow makes the hub follow the sessions its streams watch through f.
// Call it before serving: when several replicas share the store, a
// session's events are appended by whichever replica runs it.
func (s *Streams) Follow(f Follower) { s.follow = f }

// NewStreams returns a hub. Close ends its streams.
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
	if opts.MaxLag <= 0 {
		opts.MaxLag = defaultMaxLag
	}
	if opts.MaxLagEvents <= 0 {
		opts.MaxLagEvents = defaultMaxLagEvents
	}
	if opts.FeedBytes <= 0 {
		opts.FeedBytes = defaultFeedBytes
	}
	return &Streams{log: log, opts: opts, feeds: make(map[string]*feed), stop: make(chan struct{})}
}

// Close ends every open stream promptly; new streams are refused
// afterwards. It is safe to call more than once.
func (s *Streams) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
	})
}

// Open returns the number of open streams.
func (s *Streams) Open() int { return int(s.open.Load()) }

// Buffered returns the bytes of encoded frames the hub holds for its
// streams: at most StreamOptions.FeedBytes per watched session.
func (s *Streams) Buffered() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, f := range s.feeds {
		f.mu.Lock()
		n += f.bytes
		f.mu.Unlock()
	}
	return n
}

// ObserveEvents implements kernel.Observer: it adds the events to their
// session's feed, if anyone watches it, and wakes its streams. It never
// blocks on a client.
func (s *Streams) ObserveEvents(evs []session.Event) {
	if len(evs) == 0 {
		return
	}
	if f := s.feed(evs[0].SessionID); f != nil {
		f.add(evs, s.opts.FeedBytes)
	}
}

// ObserveSessionEnded implements kernel.Observer: the session's streams
// end once they have delivered lastSeq.
func (s *Streams) ObserveSessionEnded(sessionID string, lastSeq int64) {
	if f := s.feed(sessionID); f != nil {
		f.end(lastSeq)
	}
}

func (s *Streams) feed(sessionID string) *feed {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.feeds[sessionID]
}

// subscribe registers a stream of session sessionID that has delivered
// everything up to after. It returns nil when the hub is closed.
func (s *Streams) subscribe(sessionID string, after int64) (*feed, *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil
	}
	f := s.feeds[sessionID]
	if f == nil {
		f = &feed{subs: make(map[*subscriber]struct{}), fresh: true}
		s.feeds[sessionID] = f
	}
	sub := &subscriber{wake: make(chan struct{}, 1), sent: after}
	f.mu.Lock()
	f.subs[sub] = struct{}{}
	f.mu.Unlock()
	s.open.Add(1)
	return f, sub
}

// unsubscribe removes sub, and its session's feed once nobody watches it.
func (s *Streams) unsubscribe(sessionID string, f *feed, sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.mu.Lock()
	delete(f.subs, sub)
	empty := len(f.subs) == 0
	f.mu.Unlock()
	if empty && s.feeds[sessionID] == f {
		delete(s.feeds, sessionID)
		if s.follow != nil && !f.fresh {
			s.follow.Unfollow(sessionID)
		}
	}
	s.open.Add(-1)
}

// followFrom starts following f's session after seq, if the hub follows
// sessions and f has just been created; its first stream calls it once it
// knows the session's last seq.
func (s *Streams) followFrom(sessionID string, f *feed, seq int64) {
	if s.follow == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.fresh && s.feeds[sessionID] == f {
		f.fresh = false
		s.follow.Follow(sessionID, seq)
	}
}

// feed is the window of a watched session's newest events, as encoded
// frames shared by all its streams. Frames hold consecutive seqs,
// base+1 … base+len(frames).
type feed struct {
	mu     sync.Mutex
	base   int64
	frames []frame
	bytes  int
	arena  []byte // frames are encoded into it; full chunks are never written again
	subs   map[*subscriber]struct{}
	ended  bool  // the session will log nothing more:
	endSeq int64 // its last event
	fresh  bool  // guarded by Streams.mu: not followed yet
}

// frame is one event's SSE frame and what a stream needs to route it.
type frame struct {
	seq   int64
	runID string
	typ   session.EventType
	at    time.Time // when the hub received it
	b     []byte
}

// subscriber is one stream's place in its feed.
type subscriber struct {
	wake chan struct{} // a token when there may be something to send
	sent int64         // guarded by feed.mu: the last seq delivered
}

// arenaChunk is the size of the buffers frames are encoded into: small
// enough to be a small-object allocation, large enough for ~60 frames.
const arenaChunk = 16 << 10

// add encodes the events that extend the window and wakes the streams.
// Events the window already holds are skipped (a session's events may
// arrive both from the kernel and, on other replicas, from a tail); after a
// gap the window restarts at the new events, and streams behind it read
// the log.
func (f *feed) add(evs []session.Event, maxBytes int) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trim(maxBytes) // before adding: when every stream is past the window, its memory is reused
	for i := range evs {
		ev := &evs[i]
		head := f.base + int64(len(f.frames))
		switch {
		case ev.Seq <= head:
			continue
		case ev.Seq > head+1:
			f.restart(ev.Seq - 1)
		}
		f.push(ev, now)
	}
	if f.bytes > maxBytes {
		f.trim(maxBytes)
	}
	for sub := range f.subs {
		select {
		case sub.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// push appends ev's frame to the window.
func (f *feed) push(ev *session.Event, now time.Time) {
	need := len(ev.Data) + len(ev.Meta) + 6*(len(ev.SessionID)+len(ev.RunID)) + 2*len(ev.Type) + 160
	if cap(f.arena)-len(f.arena) < need {
		f.arena = make([]byte, 0, max(arenaChunk, need))
	}
	start := len(f.arena)
	f.arena = appendEventFrame(f.arena, ev)
	b := f.arena[start:len(f.arena):len(f.arena)]
	f.frames = append(f.frames, frame{seq: ev.Seq, runID: ev.RunID, typ: ev.Type, at: now, b: b})
	f.bytes += len(b)
}

// restart empties the window so that it continues after seq.
func (f *feed) restart(seq int64) {
	f.frames, f.bytes, f.base = nil, 0, seq
}

// trim drops the frames every stream has delivered, and the oldest beyond
// maxBytes, which streams still behind them then read from the log. A
// stream reads the frames after the seq it last reported to next, without
// the lock, so memory holding frames some stream may still be reading is
// never written again: it is reused only once every stream is past it all.
func (f *feed) trim(maxBytes int) {
	floor := f.base + int64(len(f.frames))
	for sub := range f.subs {
		floor = min(floor, sub.sent)
	}
	n, dropped := int(max(floor-f.base, 0)), 0
	for _, fr := range f.frames[:n] {
		dropped += len(fr.b)
	}
	for n < len(f.frames) && f.bytes-dropped > maxBytes {
		dropped += len(f.frames[n].b)
		n++
	}
	if n == 0 {
		return
	}
	f.bytes -= dropped
	f.base += int64(n)
	if n == len(f.frames) {
		// Every stream has delivered every frame, so none is reading any:
		// the window's memory can be used again.
		f.frames, f.arena = f.frames[:0], f.arena[:0]
		return
	}
	f.frames = f.frames[n:]
	if cap(f.frames) > 4*len(f.frames)+64 {
		f.frames = append([]frame(nil), f.frames...)
	}
}

// end records that the session logs nothing after lastSeq.
func (f *feed) end(lastSeq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended || lastSeq < f.endSeq {
		f.ended, f.endSeq = true, lastSeq
	}
	for sub := range f.subs {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// ready is what a stream may send next, read under the feed's lock.
type ready struct {
	frames  []frame // after the stream's last seq; nil when it must read the log
	fromLog bool    // the stream is behind the window
	head    int64   // the newest seq the hub knows of
	ended   bool
	endSeq  int64
}

// next records that sub has delivered sent and returns what follows.
func (f *feed) next(sub *subscriber, sent int64) ready {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub.sent = sent
	r := ready{head: max(f.base+int64(len(f.frames)), sent), ended: f.ended, endSeq: f.endSeq}
	switch {
	case sent < f.base:
		r.fromLog = true
	case sent < r.head:
		r.frames = f.frames[sent-f.base:]
	}
	return r
}
