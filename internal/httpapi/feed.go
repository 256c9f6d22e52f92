package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// feedPoll is how often a feed stream reads the log when nothing woke it:
// entries appended by other replicas wake nobody here.
const feedPoll = time.Second

// feedPage bounds the entries a feed stream reads at once.
const feedPage = 200

// feedSummary is a session as the feed shows it.
type feedSummary struct {
	ID               string            `json:"id"`
	Agent            string            `json:"agent"`
	Title            *string           `json:"title"`
	Name             *string           `json:"name"`
	Metadata         map[string]string `json:"metadata"`
	Status           session.Status    `json:"status"`
	UpdatedAt        time.Time         `json:"updated_at"`
	LastSeq          int64             `json:"last_seq"`
	PendingApprovals int               `json:"pending_approvals"`
	// Unread counts the assistant messages the stream's reader has not
	// read (PUT /sessions/{id}/read).
	Unread int `json:"unread"`
}

// feedEvent is the data of one frame of the feed.
type feedEvent struct {
	Type    string      `json:"type"`
	Seq     int64       `json:"seq"`
	Time    time.Time   `json:"time"`
	Session feedSummary `json:"session"`
}

// feedSnapshot is the data of the snapshot frame: a page of sessions.
type feedSnapshot struct {
	Type string        `json:"type"`
	Seq  int64         `json:"seq"`
	Data []feedSummary `json:"data"`
}

// toFeedSummary shapes s as reader sees it.
func toFeedSummary(s kernel.FeedSummary, reader string) feedSummary {
	md := s.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return feedSummary{ID: session.PublicID(s.ID), Agent: s.Agent, Title: nullable(s.Title), Name: nullable(s.Name),
		Metadata: md, Status: s.Status, UpdatedAt: s.UpdatedAt, LastSeq: s.LastSeq, PendingApprovals: s.PendingApprovals,
		Unread: s.Unread(reader)}
}

// feedStream is one client's GET /sessions/events.
type feedStream struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	tenant string
	reader string              // whose unread counts it shows
	filter kernel.ListSessions // agent and metadata, as GET /sessions takes them
	after  int64               // the seq of the last entry sent or skipped
	buf    []byte
	idle   *time.Timer
}

// handleSessionFeed handles "GET /sessions/events".
func (s *Server) handleSessionFeed(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Feed == nil {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeFeedUnavailable, "this kerneld keeps no session feed")
	}
	snapshot, err := boolParam(r, "snapshot")
	if err != nil {
		return err
	}
	md, err := metadataFilter(r)
	if err != nil {
		return err
	}
	tenant := kernel.TenantFrom(r.Context())
	head, err := s.opts.Feed.Head(r.Context(), tenant)
	if err != nil {
		return err
	}
	after, err := eventCursor(r, head)
	if err != nil {
		return err
	}
	if !hasCursor(r) {
		after = head // no cursor: what happens from now on
	}
	fs := &feedStream{s: s, w: w, rc: http.NewResponseController(w), tenant: tenant, reader: readerFrom(r), after: after,
		filter: kernel.ListSessions{Agent: r.URL.Query().Get("agent"), Metadata: md}, idle: time.NewTimer(s.streams.opts.Heartbeat)}
	defer fs.idle.Stop()
	if snapshot || fs.missed(r.Context(), after) {
		// A sidebar starts from the current page; a client whose entries
		// were dropped from the feed starts over from it.
		if err := fs.snapshot(r.Context(), head); err != nil {
			return err
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if fs.write(append([]byte(retryLine), fs.buf...)) == nil {
		fs.buf = fs.buf[:0]
		fs.run(r.Context())
	}
	return nil
}

// hasCursor reports whether r names where to resume.
func hasCursor(r *http.Request) bool {
	return r.Header.Get("Last-Event-ID") != "" || r.URL.Query().Get("after") != ""
}

// missed reports whether entries after seq after were dropped from the
// feed before this client read them.
func (fs *feedStream) missed(ctx context.Context, after int64) bool {
	first, err := fs.s.opts.Feed.Read(ctx, fs.tenant, after, 1)
	return err == nil && len(first) == 1 && first[0].Seq > after+1
}

// snapshot queues the snapshot frame, the first page of the sessions
// the filters select as of seq head, and moves the stream to head.
func (fs *feedStream) snapshot(ctx context.Context, head int64) error {
	page, err := fs.s.kernel.ListSessions(ctx, fs.filter)
	if err != nil {
		return err
	}
	snap := feedSnapshot{Type: "snapshot", Seq: head, Data: make([]feedSummary, 0, len(page.Items))}
	for _, sess := range page.Items {
		sum, err := fs.s.kernel.FeedSummary(ctx, sess.ID)
		if err != nil {
			return err
		}
		snap.Data = append(snap.Data, toFeedSummary(sum, fs.reader))
	}
	fs.after = head
	return fs.appendFrame(head, "snapshot", snap)
}

// run sends the feed's entries until the client leaves, a write fails or
// the server shuts down.
func (fs *feedStream) run(ctx context.Context) {
	poll := time.NewTicker(feedPoll)
	defer poll.Stop()
	for {
		woken := fs.s.opts.Feed.Wait(fs.tenant) // before reading: no append slips between
		n, err := fs.step(ctx)
		if err != nil {
			return
		}
		if n == feedPage {
			continue
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-fs.idle.C:
			if fs.write([]byte(": ping\n\n")) != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-fs.s.streams.stop:
			return
		}
	}
}

// step sends the entries after fs.after that pass the filters and
// returns how many it read.
func (fs *feedStream) step(ctx context.Context) (int, error) {
	entries, err := fs.s.opts.Feed.Read(ctx, fs.tenant, fs.after, feedPage)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		var sum kernel.FeedSummary
		if err := json.Unmarshal(e.Data, &sum); err != nil {
			return 0, err
		}
		fs.after = e.Seq
		if !fs.passes(sum) {
			continue
		}
		if err := fs.appendFrame(e.Seq, e.Kind, feedEvent{Type: e.Kind, Seq: e.Seq, Time: e.Time.UTC(), Session: toFeedSummary(sum, fs.reader)}); err != nil {
			return 0, err
		}
	}
	if len(fs.buf) > 0 {
		err = fs.write(fs.buf)
		fs.buf = fs.buf[:0]
	}
	return len(entries), err
}

// passes reports whether sum passes the stream's filters.
func (fs *feedStream) passes(sum kernel.FeedSummary) bool {
	q := session.Query{Agent: fs.filter.Agent, Metadata: fs.filter.Metadata}
	return q.Matches(&session.Session{Agent: sum.Agent, Metadata: sum.Metadata})
}

// appendFrame queues one frame: id seq, event name, data v.
func (fs *feedStream) appendFrame(seq int64, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fs.buf = append(fs.buf, "id: "...)
	fs.buf = strconv.AppendInt(fs.buf, seq, 10)
	fs.buf = append(fs.buf, "\nevent: "...)
	fs.buf = append(fs.buf, name...)
	fs.buf = append(fs.buf, "\ndata: "...)
	fs.buf = append(fs.buf, data...)
	fs.buf = append(fs.buf, "\n\n"...)
	return nil
}

// write sends b with one write and one flush, within the write timeout.
func (fs *feedStream) write(b []byte) error {
	_ = fs.rc.SetWriteDeadline(time.Now().Add(fs.s.streams.opts.WriteTimeout)) // unsupported writers just block longer
	if _, err := fs.w.Write(b); err != nil {
		return err
	}
	if err := fs.rc.Flush(); err != nil {
		return err
	}
	fs.idle.Reset(fs.s.streams.opts.Heartbeat)
	return nil
}
