package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// frameWriter is the http.ResponseWriter r3labs writes one stream to. It
// turns r3labs' output into kerneld's stream:
//   - on the first Flush (r3labs has registered its subscriber by then, so
//     nothing published from now on is missed) it registers the stream
//     with the hub and replays the backlog from the durable log;
//   - it drops live frames already delivered by the replay and fills any
//     gap from the log, so the client sees every seq once, in order;
//   - it writes every frame in one canonical form (id, event, data) with a
//     write deadline, and ends the stream after its final event.
//
// r3labs calls it from a single goroutine.
type frameWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	hub *Streams
	st  *stream
	log eventReader
	ctx context.Context

	started bool
	done    bool   // ended or failed: further output is discarded
	frame   []byte // what r3labs wrote since its last Flush
	out     []byte // reused encoding buffer
}

func (f *frameWriter) Header() http.Header { return f.w.Header() }

func (f *frameWriter) WriteHeader(code int) { f.w.WriteHeader(code) }

func (f *frameWriter) Write(p []byte) (int, error) {
	if !f.done {
		f.frame = append(f.frame, p...)
	}
	return len(p), nil
}

// Flush handles the frame r3labs just finished.
func (f *frameWriter) Flush() {
	if f.done {
		f.frame = f.frame[:0]
		return
	}
	if !f.started {
		f.started = true
		f.start()
		return
	}
	id, runID, typ, data, ok := parseFrame(f.frame)
	f.frame = f.frame[:0]
	if !ok { // a comment: the heartbeat
		if f.write(append(f.out[:0], ": ping\n\n"...)) {
			f.checkRunGone()
		}
		return
	}
	f.live(id, runID, typ, data)
}

// start registers the stream and replays the backlog. The session is
// looked at only after registering: a close before that is seen here, a
// close after it reaches the stream through the hub.
func (f *frameWriter) start() {
	f.hub.add(f.st)
	s, err := f.log.GetSession(f.ctx, f.st.sessionID)
	if err != nil {
		f.end() // deleted meanwhile
		return
	}
	if s.State == session.StateClosed {
		f.st.setEnd(s.LastSeq)
	}
	f.out = append(f.out[:0], retryLine...)
	f.write(f.out)
	if f.catchUp(0) && f.st.finished() {
		f.end() // a closed session with nothing left to send
	}
}

// live delivers one event published after the stream started.
func (f *frameWriter) live(seq int64, runID, typ, data []byte) {
	sent := f.st.lastSent()
	if seq <= sent {
		return // the replay delivered it already
	}
	if seq > sent+1 && !f.catchUp(seq-1) {
		return
	}
	f.out = appendFrame(f.out[:0], seq, typ, data)
	f.deliver(seq, string(runID), session.EventType(typ), f.out)
}

// catchUp delivers events from the log after the last one sent, up to and
// including seq (to the end of the log when seq is 0). It reports whether
// the stream is still open.
func (f *frameWriter) catchUp(upTo int64) bool {
	for !f.done {
		after := f.st.lastSent()
		if upTo > 0 && after >= upTo {
			return true
		}
		evs, err := f.log.Events(f.ctx, f.st.sessionID, after, backlogPage)
		if err != nil {
			f.end()
			return false
		}
		for i := range evs {
			if upTo > 0 && evs[i].Seq > upTo {
				return !f.done
			}
			f.out = appendEventFrame(f.out[:0], &evs[i])
			f.deliver(evs[i].Seq, evs[i].RunID, evs[i].Type, f.out)
		}
		if len(evs) < backlogPage {
			return !f.done
		}
	}
	return false
}

// checkRunGone ends a run's stream whose run ended without logging
// anything: a queued run cancelled before it started. Heartbeats call it,
// which bounds how long such a stream lingers.
func (f *frameWriter) checkRunGone() {
	if f.st.runID == "" {
		return
	}
	run, err := f.log.GetRun(f.ctx, f.st.sessionID, f.st.runID)
	if err != nil || (run.State.Terminal() && run.StartSeq == 0) {
		f.end()
	}
}

// deliver writes one event's frame, unless the stream follows another
// run, and ends the stream after its last event.
func (f *frameWriter) deliver(seq int64, runID string, typ session.EventType, frame []byte) {
	if f.done {
		return
	}
	if f.st.runID != "" && runID != f.st.runID {
		f.st.delivered(seq) // skipped, not missing
		return
	}
	if !f.write(frame) {
		return
	}
	ended := f.st.delivered(seq)
	if ended || (f.st.runID != "" && typ.Ends()) {
		f.end()
	}
}

// write sends b to the client and flushes. A client that cannot take it
// within the write timeout is gone: the stream ends.
func (f *frameWriter) write(b []byte) bool {
	if f.done {
		return false
	}
	_ = f.rc.SetWriteDeadline(time.Now().Add(f.hub.opts.WriteTimeout)) // unsupported writers just block longer
	if _, err := f.w.Write(b); err != nil {
		f.end()
		return false
	}
	if err := f.rc.Flush(); err != nil {
		f.end()
		return false
	}
	return true
}

// end stops the stream: r3labs notices the cancelled context and returns.
func (f *frameWriter) end() {
	f.done = true
	f.st.cancel()
}

// appendFrame appends one SSE frame in kerneld's canonical form.
func appendFrame(dst []byte, seq int64, typ, data []byte) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// appendEventFrame appends ev's frame, encoding its JSON in place.
func appendEventFrame(dst []byte, ev *session.Event) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, ev.Seq, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, ev.Type...)
	dst = append(dst, "\ndata: "...)
	dst = ev.AppendJSON(dst)
	return append(dst, "\n\n"...)
}

// appendFrameID appends the id the hub gives r3labs for ev: its seq and
// its run. r3labs never shows it to a client: frameWriter parses it back.
func appendFrameID(dst []byte, ev *session.Event) []byte {
	dst = strconv.AppendInt(dst, ev.Seq, 10)
	dst = append(dst, ' ')
	return append(dst, ev.RunID...)
}

// parseFrame reads the id (seq and run), event and data fields r3labs
// wrote for one event. ok is false for a frame without an id (a comment).
func parseFrame(frame []byte) (id int64, runID, typ, data []byte, ok bool) {
	for len(frame) > 0 {
		var line []byte
		line, frame, _ = bytes.Cut(frame, []byte("\n"))
		name, value, _ := bytes.Cut(line, []byte(": "))
		switch string(name) {
		case "id":
			seq, run, _ := bytes.Cut(value, []byte(" "))
			n, err := strconv.ParseInt(string(seq), 10, 64)
			if err != nil {
				return 0, nil, nil, nil, false
			}
			id, runID, ok = n, run, true
		case "event":
			typ = value
		case "data":
			data = value
		}
	}
	return id, runID, typ, data, ok
}
