package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"
)

// FollowOptions tune a Stream.
type FollowOptions struct {
	// After resumes after this seq: only later events are delivered.
	// 0 delivers the log from its start.
	After int64
	// Snapshot starts the stream with one MESSAGES_SNAPSHOT of the runs
	// that are over instead of their events (?snapshot=messages), for a
	// view drawn anew. Ignored with After.
	Snapshot bool
	// MaxRetries is how many reconnects in a row may fail before Next
	// gives up with the last error; 0 means 10, a negative value retries
	// until the context ends.
	MaxRetries int
	// RetryDelay is the wait before the first reconnect, doubled after
	// each failure up to 5 s; 0 means 250 ms.
	RetryDelay time.Duration
}

// ErrStreamClosed is returned by Next after Close.
var ErrStreamClosed = errors.New("kerneld: stream closed")

// Stream reads a session's events as they are logged, over
// Server-Sent Events. When the connection is cut or the server drops it,
// Stream reconnects with Last-Event-ID and continues after the last event
// it delivered: no event is skipped or repeated. It is not safe for
// concurrent use, except Close.
type Stream struct {
	c         *Client
	parent    context.Context // the caller's
	ctx       context.Context // parent, ended by Close too
	cancel    context.CancelFunc
	sessionID string
	opts      FollowOptions

	// run is set for StreamRun: only the events of the run runID are
	// delivered, and the stream ends after the event that ends the run.
	run   bool
	runID string

	body       io.ReadCloser
	frames     *frameReader
	lastSeq    int64             // the seq of the last event delivered (or After)
	roles      map[string]string // messageId → role, of the text messages open
	failures   int               // failed reconnects in a row
	reconnects int
	err        error // sticky: the stream has ended
}

// Follow opens the event stream of a session (GET /sessions/{id}/events).
// It follows the session until ctx ends, Close is called, or the session
// is closed or deleted (Next then returns io.EOF). The first connection
// is made here, so a bad session id or key fails at once with a *Problem.
func (c *Client) Follow(ctx context.Context, sessionID string, opts FollowOptions) (*Stream, error) {
	s := c.newStream(ctx, sessionID, opts)
	if err := s.connect(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// StreamRun posts input to a session and streams that run's events
// (POST /sessions/{id}/run with Accept: text/event-stream), from its
// RUN_STARTED to the RUN_FINISHED or RUN_ERROR that ends it; Next then
// returns io.EOF. A cut connection is resumed from the session's stream:
// the run is never posted twice. RunID names the run.
func (c *Client) StreamRun(ctx context.Context, sessionID string, req CreateRunRequest, opts FollowOptions) (*Stream, error) {
	s := c.newStream(ctx, sessionID, opts)
	s.run = true
	if err := s.post(req); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (c *Client) newStream(ctx context.Context, sessionID string, opts FollowOptions) *Stream {
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 10
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 250 * time.Millisecond
	}
	sctx, cancel := context.WithCancel(ctx)
	return &Stream{c: c, parent: ctx, ctx: sctx, cancel: cancel, sessionID: sessionID, opts: opts, lastSeq: opts.After}
}

// RunID is the run a StreamRun stream follows ("" for Follow).
func (s *Stream) RunID() string { return s.runID }

// LastSeq is the seq of the last event delivered: where a new stream
// would resume (FollowOptions.After).
func (s *Stream) LastSeq() int64 { return s.lastSeq }

// Reconnects counts the times the stream was resumed after a cut.
func (s *Stream) Reconnects() int { return s.reconnects }

// Close ends the stream and releases its connection; a Next blocked in
// another goroutine returns ErrStreamClosed.
func (s *Stream) Close() { s.cancel() }

// All iterates over the events until the stream ends. The loop ends
// after an error, which is yielded once; io.EOF, the normal end, is not.
func (s *Stream) All() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := s.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Next returns the next event. It returns io.EOF when the stream has
// ended normally (the run ended, for StreamRun; the session was closed
// or deleted, for Follow), the context's error once it ends,
// ErrStreamClosed after Close, and otherwise the error that made the
// reconnects fail (a *Problem when kerneld refused).
func (s *Stream) Next() (Event, error) {
	for s.err == nil {
		if s.body == nil {
			if err := s.reconnect(); err != nil {
				s.end(err)
				break
			}
			continue
		}
		f, err := s.frames.next()
		if err != nil {
			s.closeBody()
			if s.ctx.Err() != nil {
				s.end(s.ctxErr())
			}
			continue // cut or dropped: resume
		}
		ev, ok, err := s.accept(f)
		if err != nil {
			s.end(err)
			break
		}
		if ok {
			if s.run && ev.RunID == s.runID && ev.Ends() {
				s.end(io.EOF)
			}
			s.noteRole(&ev)
			return ev, nil
		}
	}
	return Event{}, s.err
}

// accept decodes a frame and says whether to deliver it: an event the
// stream already delivered (seq ≤ LastSeq) or of another run is skipped.
func (s *Stream) accept(f frame) (Event, bool, error) {
	var seq int64
	if f.id != nil {
		n, err := strconv.ParseInt(string(f.id), 10, 64)
		if err != nil {
			return Event{}, false, fmt.Errorf("event stream: bad id %q", f.id)
		}
		seq = n
	}
	ev, err := ParseEvent(append([]byte{}, f.data...), seq)
	if err != nil {
		return Event{}, false, err
	}
	// A snapshot, and the run carrying an idle session's, repeat the id of
	// the event before them: they are not in the log.
	if ev.Type != MessagesSnapshot && !ev.Snapshot && seq <= s.lastSeq {
		return ev, false, nil
	}
	s.lastSeq = max(s.lastSeq, seq)
	if s.run && s.runID == "" && ev.Type == RunStarted {
		s.runID = ev.RunID // an answer without Location
	}
	if s.run && ev.RunID != s.runID {
		return ev, false, nil
	}
	return ev, true, nil
}

// noteRole keeps the role of each text message from its START until its
// END, and sets it on the message's CONTENT and END events.
func (s *Stream) noteRole(ev *Event) {
	switch ev.Type {
	case TextMessageStart:
		if s.roles == nil {
			s.roles = map[string]string{}
		}
		s.roles[ev.MessageID] = ev.Role
	case TextMessageContent:
		ev.Role = s.roles[ev.MessageID]
	case TextMessageEnd:
		ev.Role = s.roles[ev.MessageID]
		delete(s.roles, ev.MessageID)
	}
}

// post opens the stream of a new run.
func (s *Stream) post(req CreateRunRequest) error {
	r := runRequest(s.sessionID, req)
	r.header.Set("Accept", "text/event-stream")
	res, err := s.send(r)
	if err != nil {
		return err
	}
	s.runID = runIDFrom(res.Header.Get("Location"))
	if isEventStream(res) {
		s.setBody(res)
		return nil
	}
	// An answer without a stream (202 and the run): follow the session.
	defer func() { _ = res.Body.Close() }() // read to its end below
	var run Run
	if err := json.NewDecoder(res.Body).Decode(&run); err != nil {
		return fmt.Errorf("decode run: %w", err)
	}
	s.runID = run.ID
	return nil
}

// connect makes the first connection of Follow.
func (s *Stream) connect() error {
	q := url.Values{}
	h := http.Header{"Accept": {"text/event-stream"}}
	if s.opts.After > 0 {
		h.Set("Last-Event-ID", strconv.FormatInt(s.opts.After, 10))
	} else if s.opts.Snapshot {
		q.Set("snapshot", "messages")
	}
	res, err := s.send(request{method: http.MethodGet, path: sessionPath(s.sessionID) + "/events", query: q, header: h})
	if err != nil {
		return err
	}
	if res.StatusCode == http.StatusNoContent {
		_ = res.Body.Close() // empty
		s.end(io.EOF)
		return nil
	}
	s.setBody(res)
	return nil
}

// reconnect resumes the stream after the last event delivered, waiting
// first, longer after each failure.
func (s *Stream) reconnect() error {
	if err := s.wait(s.backoff()); err != nil {
		return err
	}
	after, err := s.resumeCursor()
	if err != nil {
		return s.failed(err)
	}
	h := http.Header{"Accept": {"text/event-stream"}, "Last-Event-ID": {strconv.FormatInt(after, 10)}}
	res, err := s.send(request{method: http.MethodGet, path: sessionPath(s.sessionID) + "/events", header: h})
	if err != nil {
		return s.failed(err)
	}
	s.failures = 0
	s.reconnects++
	if res.StatusCode == http.StatusNoContent {
		_ = res.Body.Close() // empty
		return io.EOF        // closed or deleted: nothing more will come
	}
	s.setBody(res)
	return nil
}

// resumeCursor is the seq to resume after. A run's stream cut before its
// first event resumes before the run's RUN_STARTED.
func (s *Stream) resumeCursor() (int64, error) {
	if s.lastSeq > 0 || !s.run || s.runID == "" {
		return s.lastSeq, nil
	}
	run, err := s.c.GetRun(s.ctx, s.sessionID, s.runID)
	if err != nil {
		return 0, err
	}
	return max(run.StartSeq-1, 0), nil
}

// failed counts a failed reconnect. It returns nil to try again, or the
// error when the stream should give up: a refusal that retrying cannot
// change, the context's end, or too many failures in a row.
func (s *Stream) failed(err error) error {
	if s.ctx.Err() != nil {
		return s.ctxErr()
	}
	var p *Problem
	if errors.As(err, &p) && p.Status != http.StatusTooManyRequests && p.Status < 500 {
		return err
	}
	s.failures++
	if s.opts.MaxRetries > 0 && s.failures > s.opts.MaxRetries {
		return err
	}
	if p != nil && p.RetryAfter > 0 {
		return s.wait(p.RetryAfter)
	}
	return nil
}

// backoff is the wait before the next reconnect.
func (s *Stream) backoff() time.Duration {
	d := s.opts.RetryDelay << min(s.failures, 10)
	return min(d, 5*time.Second)
}

// wait sleeps for d unless the stream's context ends first.
func (s *Stream) wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		return s.ctxErr()
	}
}

// send makes a streaming request; an error answer is a *Problem.
func (s *Stream) send(r request) (*http.Response, error) {
	req, err := s.c.newRequest(s.ctx, r)
	if err != nil {
		return nil, err
	}
	res, err := s.c.http.Do(req)
	if err != nil {
		if s.ctx.Err() != nil {
			return nil, s.ctxErr()
		}
		return nil, err
	}
	if res.StatusCode >= 400 {
		defer func() { _ = res.Body.Close() }() // readProblem reads what it needs
		return nil, readProblem(res)
	}
	return res, nil
}

func (s *Stream) setBody(res *http.Response) {
	s.body = res.Body
	s.frames = newFrameReader(res.Body)
}

func (s *Stream) closeBody() {
	if s.body != nil {
		_ = s.body.Close() // the connection is abandoned either way
		s.body = nil
	}
}

// end makes err the stream's last word and releases the connection.
func (s *Stream) end(err error) {
	if s.err == nil {
		s.err = err
	}
	s.closeBody()
	s.cancel()
}

// ctxErr is the error for an ended context: the caller's context's error,
// or ErrStreamClosed after Close.
func (s *Stream) ctxErr() error {
	if err := s.parent.Err(); err != nil {
		return err
	}
	return ErrStreamClosed
}

// runIDFrom takes the run id from a Location /sessions/{id}/runs/{run_id}.
func runIDFrom(location string) string {
	if location == "" {
		return ""
	}
	id, err := url.PathUnescape(path.Base(location))
	if err != nil {
		return ""
	}
	return id
}

// isEventStream reports whether res carries an event stream.
func isEventStream(res *http.Response) bool {
	mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return err == nil && mt == "text/event-stream" && res.StatusCode == http.StatusOK
}
