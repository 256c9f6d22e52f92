package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

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
	objects := dataObjects(frames)
	objects[1] = []byte(frames[1].data) // a snapshot has no seq of its own
	aguitest.VerifyJSON(t, objects)
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
// first, with the id of the log's last event, and the stream goes on live.
func TestEventStream_SnapshotIdle(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	ts.waitRun(t, id, ts.startRun(t, id, "first"))
	last := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["last_seq"].(float64)

	s := ts.openStream(t, "GET", "/sessions/"+id+"/events?snapshot=messages", "")
	ts.startRun(t, id, "second") // the snapshot is taken before the response starts
	frames := readSnapshotStream(t, s)
	if frames[0].event != "MESSAGES_SNAPSHOT" || frames[0].id != int64(last) {
		t.Fatalf("first frame = %s id %d, want MESSAGES_SNAPSHOT id %v", frames[0].event, frames[0].id, last)
	}
	assertSeqs(t, frames[1:], int64(last)+1, frames[len(frames)-1].id)
	if diff := cmp.Diff(storedConversation(t, ts, id), drawConversation(t, frames)); diff != "" {
		t.Errorf("drawn conversation differs from the history (-stored +drawn):\n%s", diff)
	}
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
	if err != nil || f.event != "MESSAGES_SNAPSHOT" || f.id != int64(len(all)) {
		t.Fatalf("closed session's snapshot stream starts with %+v, %v", f, err)
	}
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
