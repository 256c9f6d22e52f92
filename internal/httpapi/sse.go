package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// streamRequest is what one SSE response should carry.
type streamRequest struct {
	sessionID string
	after     int64  // deliver events with seq > after
	runID     string // only this run's events; the stream ends after its end
	// quiet holds `"messageId":"<id>"` of messages the client has
	// already (an AG-UI client's own input, its tool results): their
	// content and result frames go as their id line alone, which SSE
	// clients do not dispatch. AG-UI clients append content to the message
	// they hold and add a message per result, so sending them again would
	// double them; the id keeps Last-Event-ID and the seqs whole.
	quiet [][]byte
	// snapshot starts the stream with a MESSAGES_SNAPSHOT instead of at
	// after (see takeSnapshot).
	snapshot bool
	// aguiView, when set, presents the run on the AG-UI route: it may end
	// the stream at an approval request and rename the run (aguiview.go).
	aguiView *aguiView
	// uiView, when set, presents the run on the AI SDK route: as a UI
	// message stream instead of AG-UI frames (aisdkview.go).
	uiView *uiView
}

// stream is one SSE response being served, by its request's goroutine.
type stream struct {
	hub *Streams
	w   http.ResponseWriter
	rc  *http.ResponseController
	log eventReader
	f   *feed
	sub *subscriber
	req streamRequest

	sent     int64     // the last seq delivered or skipped
	caughtUp bool      // the backlog the log held at the start is delivered
	behind   time.Time // since when the stream has had something to send; zero when idle
	idle     *time.Timer
	buf      []byte // the next write, reused

	snapshot   []byte // the MESSAGES_SNAPSHOT frame still to send, if any
	snapshotAt int64  // sent after the event with this seq; 0: first
}

// serve streams a session's events to w: the log after req.after, then
// live events, until the client leaves, the stream ends (its session or
// run ended), it is dropped, or the hub closes. It returns an error only
// before it has written anything: a closed hub, a deleted session.
func (s *Streams) serve(w http.ResponseWriter, r *http.Request, log eventReader, req streamRequest) error {
	f, sub := s.subscribe(req.sessionID, req.after)
	if f == nil {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeShuttingDown, "kerneld is shutting down")
	}
	defer s.unsubscribe(req.sessionID, f, sub)
	// Read the session only once subscribed: a close before this is seen
	// here, a close after it reaches the feed.
	sess, err := log.GetSession(r.Context(), req.sessionID)
	if err != nil {
		return err
	}
	s.followFrom(req.sessionID, f, sess.LastSeq)
	if sess.State == session.StateClosed {
		f.end(sess.LastSeq)
		if req.runID == "" && !req.snapshot && req.after >= sess.LastSeq {
			// Nothing will ever follow: 204 tells an EventSource to stop
			// reconnecting.
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
	}
	st := &stream{hub: s, w: w, rc: http.NewResponseController(w), log: log, f: f, sub: sub, req: req,
		sent: req.after, idle: time.NewTimer(s.opts.Heartbeat)}
	defer st.idle.Stop()
	if req.snapshot {
		if err := st.takeSnapshot(r.Context()); err != nil {
			return err
		}
	}
	if req.aguiView != nil {
		st.snapshot = req.aguiView.preface // sent first, like a snapshot
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if st.write(st.appendSnapshot(append(st.buf[:0], retryLine...), 0)) == nil {
		st.run(r.Context())
	}
	return nil
}

// dropReason says why a stream was dropped; "" keeps it open.
type dropReason string

const (
	dropNotReading dropReason = "client not reading"
	dropLagging    dropReason = "too far behind"
	dropShutdown   dropReason = "kerneld is shutting down"
)

// run delivers until the stream ends.
func (st *stream) run(ctx context.Context) {
	for {
		more, done, drop := st.step(ctx)
		switch {
		case drop != "":
			st.dropped(drop)
			return
		case done:
			return
		case more:
			continue
		}
		select {
		case <-st.sub.wake:
		case <-st.idle.C:
			if st.write(append(st.buf[:0], ": ping\n\n"...)) != nil {
				st.dropped(dropNotReading)
				return
			}
			if st.runGone(ctx) || st.sessionGone(ctx) {
				return
			}
		case <-ctx.Done():
			return // the client left
		case <-st.hub.stop:
			st.dropped(dropShutdown)
			return
		}
	}
}

// step writes what is ready, if anything. more says there may be more to
// write at once; done that the stream has ended; drop why it must be
// dropped.
func (st *stream) step(ctx context.Context) (more, done bool, drop dropReason) {
	if !st.caughtUp {
		return st.fromLog(ctx, true)
	}
	r := st.f.next(st.sub, st.sent)
	if r.fromLog {
		return st.fromLog(ctx, false)
	}
	if len(r.frames) == 0 {
		st.behind = time.Time{}
		return false, r.ended && st.sent >= r.endSeq, ""
	}
	if drop := st.lagging(r.head); drop != "" {
		return false, false, drop
	}
	st.buf = st.buf[:0]
	for _, fr := range r.frames {
		send, last := st.admit(fr.runID, fr.typ, fr.b)
		switch {
		case send && st.req.uiView != nil:
			var end bool
			st.buf, end = st.req.uiView.render(ctx, st.buf, fr.typ, fr.b)
			last = last || end
		case send && st.elides(fr.typ, fr.b):
			st.buf = appendIDFrame(st.buf, fr.seq)
		case send:
			st.buf = append(st.buf, st.req.aguiView.present(fr.typ, fr.b)...)
			last = last || st.interrupts(ctx, fr.seq, fr.typ, fr.b)
		}
		st.sent = fr.seq
		if last || (r.ended && st.sent >= r.endSeq) {
			done = true
			break
		}
		if len(st.buf) >= maxWriteBytes {
			break
		}
	}
	if err := st.flushBuf(); err != nil {
		return false, false, dropNotReading
	}
	return !done, done, ""
}

// fromLog delivers one page of the log after the last seq sent. initial
// is the replay a stream starts with: it ends once the log has no more.
func (st *stream) fromLog(ctx context.Context, initial bool) (more, done bool, drop dropReason) {
	evs, err := st.log.Events(ctx, st.req.sessionID, st.sent, backlogPage)
	if err != nil {
		return false, true, "" // deleted meanwhile, or the client left
	}
	if initial && len(evs) < backlogPage {
		st.caughtUp = true
	}
	if len(evs) > 0 {
		if drop := st.lagging(evs[len(evs)-1].Seq); drop != "" {
			return false, false, drop
		}
	}
	st.buf = st.buf[:0]
	for i := range evs {
		ev := &evs[i]
		frameStart := len(st.buf)
		st.buf = appendEventFrame(st.buf, ev)
		send, last := st.admit(ev.RunID, ev.Type, st.buf[frameStart:])
		switch {
		case !send:
			st.buf = st.buf[:frameStart]
		case st.req.uiView != nil:
			var end bool
			st.buf, end = st.req.uiView.render(ctx, st.buf[:frameStart], ev.Type, st.buf[frameStart:])
			last = last || end
		case st.elides(ev.Type, st.buf[frameStart:]):
			st.buf = appendIDFrame(st.buf[:frameStart], ev.Seq)
		default:
			st.buf = append(st.buf[:frameStart], st.req.aguiView.present(ev.Type, st.buf[frameStart:])...)
			last = last || st.interrupts(ctx, ev.Seq, ev.Type, st.buf[frameStart:])
		}
		st.buf = st.appendSnapshot(st.buf, ev.Seq)
		st.sent = ev.Seq
		if last {
			done = true
			break
		}
		if len(st.buf) >= maxWriteBytes {
			if err := st.flushBuf(); err != nil {
				return false, false, dropNotReading
			}
		}
	}
	if err := st.flushBuf(); err != nil {
		return false, false, dropNotReading
	}
	if !done && st.caughtUp {
		r := st.f.next(st.sub, st.sent) // a closed session's stream ends here
		done = r.ended && st.sent >= r.endSeq
	}
	return !done && len(evs) > 0, done, ""
}

// lagging reports whether a stream with something to send is genuinely
// behind: further than MaxLagEvents behind head, or behind for longer
// than MaxLag.
func (st *stream) lagging(head int64) dropReason {
	now := time.Now()
	if st.behind.IsZero() {
		st.behind = now
	}
	if head-st.sent > st.hub.opts.MaxLagEvents || now.Sub(st.behind) > st.hub.opts.MaxLag {
		return dropLagging
	}
	return ""
}

// admit decides whether an event goes to this stream, and whether it is
// the stream's last. A session stream takes everything; a run's stream
// takes its run's events and ends after the run's end, or when the run,
// still queued, is cancelled (the active run logs that for it).
func (st *stream) admit(runID string, typ session.EventType, frame []byte) (send, last bool) {
	switch {
	case st.req.runID == "":
		return true, false
	case runID == st.req.runID:
		return true, typ.Ends()
	}
	return false, typ == session.EventCustom && cancelsQueuedRun(frame, st.req.runID)
}

// elides reports whether frame, one of the stream's, is the content of
// the message the client has already (see streamRequest.quiet).
func (st *stream) elides(typ session.EventType, frame []byte) bool {
	if typ != session.EventTextMessageContent && typ != session.EventToolCallResult {
		return false
	}
	for _, q := range st.req.quiet {
		if bytes.Contains(frame, q) {
			return true
		}
	}
	return false
}

// appendIDFrame appends a frame of the id line alone: it moves a client's
// Last-Event-ID to seq and dispatches no event.
func appendIDFrame(dst []byte, seq int64) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, "\n\n"...)
}

// cancelsQueuedRun reports whether frame is the notice that runID was
// cancelled before it started.
func cancelsQueuedRun(frame []byte, runID string) bool {
	return bytes.Contains(frame, []byte(`"kerneld.run.cancelled"`)) && bytes.Contains(frame, []byte(runID))
}

// runGone reports whether a run's stream must end because its run ended
// without logging anything (a queued run cancelled before it started,
// whose notice the stream missed). Heartbeats call it, which bounds how
// long such a stream lingers.
func (st *stream) runGone(ctx context.Context) bool {
	if st.req.runID == "" {
		return false
	}
	run, err := st.log.GetRun(ctx, st.req.sessionID, st.req.runID)
	return err != nil || (run.State.Terminal() && run.StartSeq == 0)
}

// sessionGone reports whether a session's stream must end because its
// session is no longer in the store although nobody deleted it through
// kerneld: deleted behind its back, or lost with the data of a store that
// restarted empty (Redis without appendonly). Nothing tells the hub of
// such a loss, so heartbeats look, which bounds how long the stream
// lingers to one heartbeat; the stream then ends as a deleted session's
// does, and its client's reconnect gets 204. Only "not found" ends it: a
// store that cannot be reached now may hold the session still.
func (st *stream) sessionGone(ctx context.Context) bool {
	if st.req.runID != "" {
		return false // runGone looks after run streams
	}
	_, err := st.log.GetSession(ctx, st.req.sessionID)
	return errdefs.CodeOf(err) == errdefs.CodeSessionNotFound
}

// flushBuf writes the frames gathered in buf, if any, in one write.
func (st *stream) flushBuf() error {
	if len(st.buf) == 0 {
		return nil
	}
	err := st.write(st.buf)
	st.buf = st.buf[:0]
	return err
}

// write sends b with one write and one flush, within the write timeout.
func (st *stream) write(b []byte) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.hub.opts.WriteTimeout)) // unsupported writers just block longer
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	if err := st.rc.Flush(); err != nil {
		return err
	}
	st.idle.Reset(st.hub.opts.Heartbeat)
	return nil
}

// dropped ends a stream the hub gives up on: it logs one line and, if the
// client may still read, tells it in a comment where to resume.
func (st *stream) dropped(why dropReason) {
	if why != dropShutdown {
		st.hub.log.Info("stream dropped", "session", st.req.sessionID, "run", st.req.runID,
			"reason", string(why), "last_seq", st.sent)
	}
	if why == dropNotReading {
		return
	}
	st.buf = append(st.buf[:0], ": dropped: "...)
	st.buf = append(st.buf, why...)
	st.buf = append(st.buf, "; resume with Last-Event-ID: "...)
	st.buf = strconv.AppendInt(st.buf, st.sent, 10)
	st.buf = append(st.buf, "\n\n"...)
	_ = st.flushBuf() // the stream ends either way
}

// appendEventFrame appends ev's SSE frame: its seq as the id, its type as
// the event name, its wire JSON as the data.
func appendEventFrame(dst []byte, ev *session.Event) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, ev.Seq, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, ev.Type...)
	dst = append(dst, "\ndata: "...)
	dst = ev.AppendStreamJSON(dst)
	return append(dst, "\n\n"...)
}
