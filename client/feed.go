package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SessionSummary is a session as the session feed shows it: what a
// sidebar draws.
type SessionSummary struct {
	ID       string            `json:"id"`
	Agent    string            `json:"agent"`
	Title    string            `json:"title"`
	Name     string            `json:"name"`
	Metadata map[string]string `json:"metadata"`
	// Status is idle, running, waiting_input, queued, stalled, failed or
	// closed.
	Status    string    `json:"status"`
	UpdatedAt time.Time `json:"updated_at"`
	LastSeq   int64     `json:"last_seq"`
	// PendingApprovals counts the tool calls waiting for a decision.
	PendingApprovals int `json:"pending_approvals"`
	// Unread counts the assistant messages after the caller's read cursor.
	Unread int `json:"unread"`
}

// Feed event types, beside FeedSnapshot.
const (
	FeedSessionCreated    = "session.created"
	FeedSessionUpdated    = "session.updated"
	FeedSessionTitled     = "session.titled"
	FeedSessionStatus     = "session.status"
	FeedRunEnded          = "run.ended"
	FeedApprovalRequested = "approval.requested"
	FeedApprovalDecided   = "approval.decided"
	FeedSessionClosed     = "session.closed"
	FeedSessionDeleted    = "session.deleted"
	FeedSessionRead       = "session.read"
	// FeedSnapshot is the first event with FeedOptions.Snapshot, and the
	// first after a resume from a cursor the feed no longer keeps: its
	// Sessions are the first page of sessions as they are now.
	FeedSnapshot = "snapshot"
)

// FeedEvent is one change to the caller's sessions, or a snapshot.
type FeedEvent struct {
	Type string    `json:"type"`
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Session is the changed session's summary as it was then.
	Session SessionSummary `json:"session"`
	// Sessions is a snapshot's page of sessions.
	Sessions []SessionSummary `json:"data"`
}

// FeedOptions tune a SessionFeed.
type FeedOptions struct {
	// Agent and Metadata filter as on ListSessions.
	Agent    string
	Metadata map[string]string
	// Snapshot starts the feed with a FeedSnapshot event.
	Snapshot bool
	// After resumes after this seq (a FeedEvent's Seq); 0 starts with
	// what happens next.
	After int64
	// MaxRetries and RetryDelay are as in FollowOptions.
	MaxRetries int
	RetryDelay time.Duration
}

// SessionFeed reads the caller's session feed (GET /sessions/events):
// one event per change to a session, in order. A cut connection is
// resumed with Last-Event-ID: no event is skipped or repeated. It is not
// safe for concurrent use, except Close.
type SessionFeed struct {
	c        *Client
	parent   context.Context
	ctx      context.Context
	cancel   context.CancelFunc
	opts     FeedOptions
	body     io.ReadCloser
	frames   *frameReader
	lastSeq  int64
	resumed  bool // a cursor is known: reconnects send it
	failures int
	err      error
}

// WatchSessions opens the session feed. The first connection is made
// here, so a bad key fails at once with a *Problem.
func (c *Client) WatchSessions(ctx context.Context, opts FeedOptions) (*SessionFeed, error) {
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 10
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 250 * time.Millisecond
	}
	fctx, cancel := context.WithCancel(ctx)
	f := &SessionFeed{c: c, parent: ctx, ctx: fctx, cancel: cancel, opts: opts, lastSeq: opts.After, resumed: opts.After > 0}
	if err := f.connect(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// LastSeq is the seq of the last event delivered: where to resume.
func (f *SessionFeed) LastSeq() int64 { return f.lastSeq }

// Close ends the feed; a Next blocked in another goroutine returns
// ErrStreamClosed.
func (f *SessionFeed) Close() { f.cancel() }

// Next returns the next event. It returns the context's error once it
// ends, ErrStreamClosed after Close, and otherwise the error that made
// the reconnects fail (a *Problem when kerneld refused).
func (f *SessionFeed) Next() (FeedEvent, error) {
	for f.err == nil {
		if f.body == nil {
			if err := f.reconnect(); err != nil {
				f.end(err)
			}
			continue
		}
		fr, err := f.frames.next()
		if err != nil {
			f.closeBody()
			continue // cut or dropped: resume
		}
		var ev FeedEvent
		if err := json.Unmarshal(fr.data, &ev); err != nil {
			f.end(fmt.Errorf("session feed: decode %s: %w", fr.event, err))
			break
		}
		if ev.Type != FeedSnapshot && ev.Seq <= f.lastSeq && f.resumed {
			continue // delivered before a reconnect
		}
		f.lastSeq, f.resumed = ev.Seq, true
		return ev, nil
	}
	return FeedEvent{}, f.err
}

// connect makes one connection, from the snapshot or the last seq.
func (f *SessionFeed) connect() error {
	q := url.Values{}
	setNonEmpty(q, "agent", f.opts.Agent)
	for k, v := range f.opts.Metadata {
		q.Set("metadata."+k, v)
	}
	h := http.Header{"Accept": {"text/event-stream"}}
	if f.resumed {
		h.Set("Last-Event-ID", strconv.FormatInt(f.lastSeq, 10))
	} else if f.opts.Snapshot {
		q.Set("snapshot", "true")
	}
	req, err := f.c.newRequest(f.ctx, request{method: http.MethodGet, path: "/sessions/events", query: q, header: h})
	if err != nil {
		return err
	}
	res, err := f.c.http.Do(req)
	if err != nil {
		if f.ctx.Err() != nil {
			return f.ctxErr()
		}
		return err
	}
	if res.StatusCode >= 400 {
		defer func() { _ = res.Body.Close() }() // readProblem reads what it needs
		return readProblem(res)
	}
	f.body, f.frames = res.Body, newFrameReader(res.Body)
	f.failures = 0
	return nil
}

// reconnect waits, longer after each failure, and connects again; it
// returns nil to go on, or the error to end with.
func (f *SessionFeed) reconnect() error {
	if f.ctx.Err() != nil {
		return f.ctxErr()
	}
	t := time.NewTimer(min(f.opts.RetryDelay<<min(f.failures, 10), 5*time.Second))
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.ctx.Done():
		return f.ctxErr()
	}
	err := f.connect()
	if err == nil {
		return nil
	}
	var p *Problem
	if f.ctx.Err() != nil || (errors.As(err, &p) && p.Status != http.StatusTooManyRequests && p.Status < 500) {
		return err
	}
	f.failures++
	if f.opts.MaxRetries > 0 && f.failures > f.opts.MaxRetries {
		return err
	}
	return nil
}

func (f *SessionFeed) closeBody() {
	if f.body != nil {
		_ = f.body.Close() // abandoned either way
		f.body = nil
	}
}

func (f *SessionFeed) end(err error) {
	if f.err == nil {
		f.err = err
	}
	f.closeBody()
	f.cancel()
}

// ctxErr is the caller's context's error, or ErrStreamClosed after Close.
func (f *SessionFeed) ctxErr() error {
	if err := f.parent.Err(); err != nil {
		return err
	}
	return ErrStreamClosed
}
