package httpapi

import (
	"context"
	"net/http"
	"strconv"
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
// with RUN_STARTED, refuses anything but RUN_STARTED after a run ends, and
// so refuses a MESSAGES_SNAPSHOT outside a run. A run in progress is
// replayed from its RUN_STARTED and the snapshot follows that event. With
// no run in progress the snapshot comes in a run of its own, one that is
// not in the log (snapshotRun): RUN_STARTED, MESSAGES_SNAPSHOT,
// RUN_FINISHED. Either way every stream kerneld sends passes a stock
// verifier.
//
// Their ids: the seq of the event before them in the stream (that
// RUN_STARTED, or the log's last event; 0 for an empty log), so the id a
// client last received is always the right one to resume after. They
// carry no metadata.kerneld.seq: they are not events of the log.
//
// Any stream route can start this way by setting streamRequest.snapshot.
func (st *stream) takeSnapshot(ctx context.Context) error {
	snap, err := st.log.MessagesSnapshot(ctx, st.req.sessionID)
	if err != nil {
		return err
	}
	ev := session.MessagesSnapshot(snap.Messages, snap.Agent)
	ev.SessionID, ev.RunID, ev.Time, ev.Seq = st.req.sessionID, snap.RunID, time.Now(), snap.After
	st.req.after, st.sent = snap.After, snap.After
	if snap.RunID != "" {
		ev.Seq = snap.After + 1 // its RUN_STARTED
		st.snapshotAt = ev.Seq
		st.snapshot = appendEventFrame(nil, &ev)
		return nil
	}
	start, end := snapshotRun(st.req.sessionID, snap.After, ev.Time)
	st.snapshot = appendEventFrame(nil, &start)
	st.snapshot = appendEventFrame(st.snapshot, &ev)
	st.snapshot = appendEventFrame(st.snapshot, &end)
	return nil
}

// snapshotRun returns the RUN_STARTED and RUN_FINISHED that carry the
// snapshot of an idle session taken after seq after. The run is
// presentation, not one of the session's runs: its AG-UI runId is
// "snapshot-<after>" (the same snapshot point, the same id), its
// metadata.kerneld names no run and says "snapshot": true, and its
// outcome is success with no usage spent.
func snapshotRun(sessionID string, after int64, now time.Time) (start, end session.Event) {
	runID := "snapshot-" + strconv.FormatInt(after, 10)
	start = session.RunStarted(sessionID, runID)
	end = session.RunFinished(sessionID, runID, session.OutcomeSuccess, "", session.Usage{})
	for _, ev := range []*session.Event{&start, &end} {
		ev.SessionID, ev.Time, ev.Seq, ev.Meta = sessionID, now, after, snapshotMeta
	}
	return start, end
}

// snapshotMeta marks the frames of a snapshotRun in metadata.kerneld.
var snapshotMeta = []byte(`{"snapshot":true}`)

// appendSnapshot appends the snapshot frames to dst if they are due after
// the event with seq seq (0: at the start of the stream), once.
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
