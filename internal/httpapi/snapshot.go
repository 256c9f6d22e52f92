package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// takeSnapshot makes the stream begin with the session's snapshot (see
// kernel.Snapshot) rather than at req.after: one MESSAGES_SNAPSHOT frame of
// the history of the runs that are over, then the log from the RUN_STARTED
// of the run in progress, then live events. A reloaded page draws the
// conversation from one frame and still sees a running answer token by
// token, each token once.
//
// Where the frame goes: AG-UI's verifyEvents requires a stream to begin
// with RUN_STARTED and refuses anything but RUN_STARTED after a run ends,
// so a run in progress is replayed from its RUN_STARTED and the snapshot
// follows that event. With no run in progress the snapshot comes first.
//
// Its id: the seq of the event before it in the stream (that RUN_STARTED,
// or the log's last event; 0 for an empty log), so the id a client last
// received is always the right one to resume after. The frame carries no
// metadata.kerneld.seq: it is not an event of the log.
//
// Any stream route can start this way by setting streamRequest.snapshot.
func (st *stream) takeSnapshot(ctx context.Context) error {
	snap, err := st.log.MessagesSnapshot(ctx, st.req.sessionID)
	if err != nil {
		return err
	}
	ev := session.MessagesSnapshot(snap.Messages)
	ev.SessionID, ev.RunID, ev.Time, ev.Seq = st.req.sessionID, snap.RunID, time.Now(), snap.After
	if snap.RunID != "" {
		ev.Seq = snap.After + 1 // its RUN_STARTED
		st.snapshotAt = ev.Seq
	}
	st.snapshot = appendEventFrame(nil, &ev)
	st.req.after, st.sent = snap.After, snap.After
	return nil
}

// appendSnapshot appends the snapshot frame to dst if it is due after the
// event with seq seq (0: at the start of the stream), once.
func (st *stream) appendSnapshot(dst []byte, seq int64) []byte {
	if st.snapshot == nil || st.snapshotAt != seq {
		return dst
	}
	dst = append(dst, st.snapshot...)
	st.snapshot = nil
	return dst
}

// snapshotParam reads ?snapshot=: "messages" asks for the stream to begin
// with a snapshot. A resuming EventSource repeats the query it was opened
// with, so Last-Event-ID wins over it: that client already has the
// snapshot and wants what follows. ?after= with it is a contradiction.
func snapshotParam(r *http.Request) (bool, error) {
	q := r.URL.Query()
	if !q.Has("snapshot") {
		return false, nil
	}
	switch {
	case q.Get("snapshot") != "messages":
		return false, errdefs.Invalid("snapshot", `must be "messages"`)
	case q.Has("after"):
		return false, errdefs.Invalid("snapshot", "cannot be combined with after: resume after an id, or start from a snapshot")
	case wantsEventPage(r):
		return false, errdefs.Invalid("snapshot", "is for the SSE stream; a JSON client reads GET /sessions/{id}/messages")
	}
	return r.Header.Get("Last-Event-ID") == "", nil
}
