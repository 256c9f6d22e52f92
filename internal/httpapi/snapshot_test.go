package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// pacedTools calls a tool, then answers one token every 30 ms: a run long
// enough to reload a page in the middle of its answer.
const pacedTools = `
name: paced
description: calls a tool, then answers slowly
model:
  provider: scripted
  token_delay: 30ms
  script:
    - {text: "Checking.", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "a b c d e f g h i j k l m n o p q r s t u v w x y z"}
tools: [current_time]
`

// TestEventStream_SnapshotReloadMidRun reloads a page in the middle of a
// running answer: the stream gives the history of the runs before in one
// MESSAGES_SNAPSHOT, then the running run from its RUN_STARTED. Drawn as a
// client draws it, the conversation equals the stored history once the
// run ends (every token once, no gap), and the sequence passes AG-UI's
// verifyEvents.
func TestEventStream_SnapshotReloadMidRun(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: []string{kerneltest.Echo, pacedTools}}})
	id := ts.createSession(t, "paced")
	ts.waitRun(t, id, ts.startRun(t, id, "first"))
	runID := ts.startRun(t, id, "second")
	live := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
	waitAnswering(t, live)

	reload := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "")
	frames := readSnapshotStream(t, reload)
	run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "")
	start := int64(run["start_seq"].(float64))

	if frames[0].event != "RUN_STARTED" || frames[0].id != start {
		t.Fatalf("first frame = %s id %d, want the running run's RUN_STARTED, id %d", frames[0].event, frames[0].id, start)
	}
	if frames[1].event != "MESSAGES_SNAPSHOT" || frames[1].id != start {
		t.Fatalf("second frame = %s id %d, want MESSAGES_SNAPSHOT with its RUN_STARTED's id %d", frames[1].event, frames[1].id, start)
	}
	rest := append([]frame{frames[0]}, frames[2:]...)
	assertSeqs(t, rest, start, rest[len(rest)-1].id)

	drawn := drawConversation(t, frames)
	stored := storedConversation(t, ts, id)
	if diff := cmp.Diff(stored, drawn); diff != "" {
		t.Errorf("drawn conversation differs from the history (-stored +drawn):\n%s", diff)
	}
	aguitest.VerifyJSON(t, streamObjects(frames))
}

// waitAnswering reads s until the running run streams its answer, after
// its tool call.
func waitAnswering(t *testing.T, s *sseStream) {
	t.Helper()
	runs, results := 0, 0
	for {
		f, err := s.next()
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		switch f.event {
		case "RUN_STARTED":
			runs, results = runs+1, 0
		case "TOOL_CALL_RESULT":
			results++
		case "TEXT_MESSAGE_CONTENT":
			if runs == 2 && results == 1 {
				return
			}
		}
	}
}

// readSnapshotStream reads a snapshot stream to the end of its run.
func readSnapshotStream(t *testing.T, s *sseStream) []frame {
	t.Helper()
	var out []frame
	for {
		f, err := s.next()
		if err != nil {
			t.Fatalf("read stream: %v (after %d frames)", err, len(out))
		}
		if f.event == "" {
			continue
		}
		out = append(out, f)
		if runEnded(f) {
			return out
		}
	}
}

// readFrames reads the next n event frames of s, which must come now:
// nothing is logged meanwhile, so a stream that sends fewer is cut short
// instead of waited for.
func readFrames(t *testing.T, s *sseStream, n int) []frame {
	t.Helper()
	var out []frame
	deadline := time.AfterFunc(10*time.Second, s.close)
	defer deadline.Stop()
	for len(out) < n {
		f, err := s.next()
		if err != nil {
			t.Fatalf("read stream: %v after %d frames, want %d: %+v", err, len(out), n, out)
		}
		if f.event != "" {
			out = append(out, f)
		}
	}
	return out
}

// drawnMessage is a message as a page shows it.
type drawnMessage struct {
	ID, Role, Content, ToolCallID string
	ToolCalls                     []string // "id name arguments"
}

// drawConversation applies frames as an AG-UI client does: the snapshot
// replaces the messages, events add to them. A message started twice is a
// duplicate.
func drawConversation(t *testing.T, frames []frame) []drawnMessage {
	t.Helper()
	var msgs []drawnMessage
	find := func(id string) int {
		for i := range msgs {
			if msgs[i].ID == id {
				return i
			}
		}
		return -1
	}
	calls := map[string][2]int{} // tool call id → message, call index
	args := map[string]string{}
	for _, f := range frames {
		var ev struct {
			Type, MessageID, Role, Delta, ToolCallID, ToolCallName, ParentMessageID, Content string
			Messages                                                                         []struct {
				ID, Role, Content, ToolCallID string
				ToolCalls                     []struct {
					ID       string
					Function struct{ Name, Arguments string }
				}
			}
		}
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
			t.Fatalf("frame %s: %v", f.data, err)
		}
		switch ev.Type {
		case "MESSAGES_SNAPSHOT":
			msgs = nil
			for _, m := range ev.Messages {
				d := drawnMessage{ID: m.ID, Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
				for _, c := range m.ToolCalls {
					d.ToolCalls = append(d.ToolCalls, c.ID+" "+c.Function.Name+" "+c.Function.Arguments)
				}
				msgs = append(msgs, d)
			}
		case "TEXT_MESSAGE_START":
			if find(ev.MessageID) >= 0 {
				t.Errorf("message %s started twice", ev.MessageID)
				continue
			}
			msgs = append(msgs, drawnMessage{ID: ev.MessageID, Role: ev.Role})
		case "TEXT_MESSAGE_CONTENT":
			if i := find(ev.MessageID); i >= 0 {
				msgs[i].Content += ev.Delta
			} else {
				t.Errorf("content for unknown message %s", ev.MessageID)
			}
		case "TOOL_CALL_START":
			i := find(ev.ParentMessageID)
			if i < 0 {
				msgs = append(msgs, drawnMessage{ID: ev.ParentMessageID, Role: "assistant"})
				i = len(msgs) - 1
			}
			calls[ev.ToolCallID] = [2]int{i, len(msgs[i].ToolCalls)}
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, ev.ToolCallName)
		case "TOOL_CALL_ARGS":
			args[ev.ToolCallID] += ev.Delta
		case "TOOL_CALL_END":
			at := calls[ev.ToolCallID]
			msgs[at[0]].ToolCalls[at[1]] = ev.ToolCallID + " " + msgs[at[0]].ToolCalls[at[1]] + " " + args[ev.ToolCallID]
		case "TOOL_CALL_RESULT":
			msgs = append(msgs, drawnMessage{ID: ev.MessageID, Role: "tool", Content: ev.Content, ToolCallID: ev.ToolCallID})
		}
	}
	return msgs
}

// storedConversation returns the session's history as drawnMessages.
func storedConversation(t *testing.T, ts *testServer, id string) []drawnMessage {
	t.Helper()
	page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages?limit=200", "")
	var out []drawnMessage
	for _, v := range page["data"].([]any) {
		m := v.(map[string]any)
		d := drawnMessage{ID: m["id"].(string), Role: m["role"].(string), Content: m["content"].(string)}
		if c, ok := m["tool_call_id"].(string); ok {
			d.ToolCallID = c
		}
		for _, c := range m["tool_calls"].([]any) {
			c := c.(map[string]any)
			d.ToolCalls = append(d.ToolCalls, c["id"].(string)+" "+c["name"].(string)+" "+c["arguments"].(string))
		}
		out = append(out, d)
	}
	return out
}

// TestEventStream_SnapshotIdle: with no run in progress the snapshot comes
// in a run of its own that the log does not hold (RUN_STARTED,
// MESSAGES_SNAPSHOT, RUN_FINISHED), each frame with the id of the log's
// last event, and the stream goes on live: the whole passes AG-UI's
// verifyEvents, which refuses a MESSAGES_SNAPSHOT outside a run.
func TestEventStream_SnapshotIdle(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	ts.waitRun(t, id, ts.startRun(t, id, "first"))
	last := int64(ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["last_seq"].(float64))

	s := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "")
	ts.startRun(t, id, "second") // the snapshot is taken before the response starts
	frames := readSnapshotStream(t, s)
	wantSnapshotRun(t, frames, id, last)
	frames = append(frames, readSnapshotStream(t, s)...) // the second run
	assertSeqs(t, frames[3:], last+1, frames[len(frames)-1].id)
	if diff := cmp.Diff(storedConversation(t, ts, id), drawConversation(t, frames)); diff != "" {
		t.Errorf("drawn conversation differs from the history (-stored +drawn):\n%s", diff)
	}
	aguitest.VerifyJSON(t, streamObjects(frames))
}

// TestEventStream_SnapshotEmpty: a session with nothing logged yet gets an
// empty snapshot in its run, with id 0, then its first run live.
func TestEventStream_SnapshotEmpty(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	s := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "")
	frames := readFrames(t, s, 3)
	wantSnapshotRun(t, frames, id, 0)
	if !strings.Contains(frames[1].data, `"messages":[]`) {
		t.Errorf("snapshot of an empty session = %s, want no messages", frames[1].data)
	}
	ts.startRun(t, id, "hello")
	frames = append(frames, readSnapshotStream(t, s)...)
	assertSeqs(t, frames[3:], 1, frames[len(frames)-1].id)
	aguitest.VerifyJSON(t, streamObjects(frames))
}

// wantSnapshotRun checks that frames are the run carrying an idle
// session's snapshot taken after seq: RUN_STARTED, MESSAGES_SNAPSHOT and
// RUN_FINISHED, each with id seq, the run named "snapshot-<seq>", marked
// in metadata.kerneld as a snapshot and naming no run of the session.
func wantSnapshotRun(t *testing.T, frames []frame, sessionID string, seq int64) {
	t.Helper()
	want := []string{"RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"}
	if len(frames) != len(want) {
		t.Fatalf("snapshot frames = %+v, want %v", frames, want)
	}
	runID := "snapshot-" + strconv.FormatInt(seq, 10)
	for i, f := range frames {
		var ev struct {
			Type, ThreadID, RunID string
			Outcome               struct{ Type string }
			Metadata              struct {
				Kerneld map[string]any
			}
		}
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
			t.Fatal(err)
		}
		if f.event != want[i] || ev.Type != want[i] || f.id != seq {
			t.Fatalf("frame %d = %s id %d, want %s id %d", i, f.event, f.id, want[i], seq)
		}
		k := ev.Metadata.Kerneld
		if k["sessionId"] != sessionID || k["runId"] != "" || k["seq"] != nil {
			t.Errorf("frame %d metadata.kerneld = %v, want the session, no run and no seq", i, k)
		}
		if f.event == "MESSAGES_SNAPSHOT" {
			continue
		}
		if ev.ThreadID != sessionID || ev.RunID != runID || k["snapshot"] != true {
			t.Errorf("%s = %s, want thread %s, run %s, metadata.kerneld.snapshot true", f.event, f.data, sessionID, runID)
		}
	}
	if frames[2].data == "" || !strings.Contains(frames[2].data, `"outcome":{"type":"success"}`) {
		t.Errorf("RUN_FINISHED = %s, want outcome success", frames[2].data)
	}
}

// streamObjects returns frames as the wire objects AG-UI's checker takes:
// log events with their seq (see dataObjects), the frames that are not
// in the log (a snapshot, the run carrying it) as sent.
func streamObjects(frames []frame) [][]byte {
	out := dataObjects(frames)
	for i, f := range frames {
		if f.event == "MESSAGES_SNAPSHOT" || strings.Contains(f.data, `"snapshot":true`) {
			out[i] = []byte(f.data)
		}
	}
	return out
}

// TestEventStream_SnapshotResume: an EventSource that reconnects repeats
// ?snapshot=messages with Last-Event-ID, and gets what follows that id,
// with no second snapshot; a closed session's snapshot is still served.
func TestEventStream_SnapshotResume(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	ts.waitRun(t, id, ts.startRun(t, id, "one two"))
	if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
		t.Fatal(err)
	}
	all := ts.openStream(t, "GET", "/sessions/"+id+"/events", "").events(t, nil)
	snap := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "")
	f, err := snap.next() // the retry line
	for err == nil && f.event == "" {
		f, err = snap.next()
	}
	if err != nil || f.event != "RUN_STARTED" || f.id != int64(len(all)) {
		t.Fatalf("closed session's snapshot stream starts with %+v, %v", f, err)
	}
	wantSnapshotRun(t, append([]frame{f}, readSnapshotStream(t, snap)...), id, int64(len(all)))
	resumed := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "", "Last-Event-ID", "2")
	assertSameFrames(t, all[2:], resumed.events(t, nil))
	res := ts.do(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "", "Accept", "text/event-stream",
		"Last-Event-ID", strconv.Itoa(len(all)))
	if res.status != http.StatusNoContent {
		t.Errorf("resume at the end of a closed session = %d %s, want 204", res.status, res.body)
	}
}

// TestEventStream_SnapshotRefused: a wrong value, a snapshot with ?after=
// or on a JSON page are 400s naming snapshot.
func TestEventStream_SnapshotRefused(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	for _, tc := range []struct{ query, accept string }{
		{"snapshot=state", "text/event-stream"},
		{"snapshot=messages&after=0", "text/event-stream"},
		{"snapshot=messages", "application/json"},
	} {
		res := ts.do(t, "GET", "/sessions/"+id+"/events?"+tc.query, "", "Accept", tc.accept)
		p := wantProblem(t, res, http.StatusBadRequest, "invalid_request")
		if _, ok := problemFields(t, p)["snapshot"]; !ok {
			t.Errorf("%s: problem %s does not name snapshot", tc.query, res.body)
		}
	}
}
