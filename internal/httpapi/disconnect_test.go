package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// slowAnswer is what the "slow" agent says, one token every 20 ms.
const slowAnswer = "a b c d e f g h i j k l m n o p q r s t u v w x y z"

// TestDisconnect_RunContinues: a client that leaves a stream mid-run does
// not stop the run. It ends succeeded, and the log holds all of it: what
// the client saw, then the rest.
func TestDisconnect_RunContinues(t *testing.T) {
	ts := newServer(t, serverOptions{})
	tests := []struct {
		name string
		// open opens a stream on session id and returns it with the run
		// it follows.
		open func(t *testing.T, id string) (*sseStream, string)
		// leave says after which frame the client leaves.
		leave func(frame) bool
	}{
		{
			name: "inline run stream right after RUN_STARTED",
			open: func(t *testing.T, id string) (*sseStream, string) {
				s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"go"}`)
				return s, strings.TrimPrefix(s.res.Header.Get("Location"), "/sessions/"+id+"/runs/")
			},
			leave: func(f frame) bool { return f.event == "RUN_STARTED" },
		},
		{
			name: "event stream mid-answer",
			open: func(t *testing.T, id string) (*sseStream, string) {
				s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
				return s, ts.startRun(t, id, "go")
			},
			leave: answering(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := ts.createSession(t, "slow")
			s, runID := tt.open(t, id)
			left := false
			seen := s.events(t, func(f frame) bool { left = tt.leave(f); return left })
			if !left {
				t.Fatalf("the stream ended after %d frames, before the client meant to leave", len(seen))
			}
			s.close()
			waitFor(t, "the server to end the stream", func() bool { return ts.streams.Open() == 0 })
			// The slow run lasts half a second; the server sees the client
			// leave within milliseconds, so the run must still be going.
			if run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, ""); run["state"] != "running" {
				t.Fatalf("run state = %v once the server saw the client leave, want running", run["state"])
			}

			run := ts.waitRun(t, id, runID)
			if run["state"] != "succeeded" || run["error"] != nil {
				t.Fatalf("run = %v, error %v; want succeeded", run["state"], run["error"])
			}
			log := ts.openStream(t, "GET", "/sessions/"+id+"/events", "").events(t, runEnded)
			assertWholeRun(t, log, 1, runID)
			if first, last := log[0].id, log[len(log)-1].id; run["start_seq"] != float64(first) || run["end_seq"] != float64(last) {
				t.Errorf("run seqs %v..%v, want the logged run's %d..%d", run["start_seq"], run["end_seq"], first, last)
			}
			if len(seen) >= len(log) {
				t.Fatalf("the client saw %d frames of %d, want it gone before the end", len(seen), len(log))
			}
			assertSameFrames(t, seen, log[:len(seen)])
			if got := assistantText(t, log); got != slowAnswer {
				t.Errorf("the logged answer is %q, want all of %q", got, slowAnswer)
			}
			aguitest.VerifyJSON(t, dataObjects(log))
		})
	}
}

// answering returns a stop function that holds once the agent has
// streamed the first token of its answer (the user's input is echoed as
// a message first).
func answering() func(frame) bool {
	contents := 0
	return func(f frame) bool {
		if f.event == "TEXT_MESSAGE_CONTENT" {
			contents++
		}
		return contents == 2
	}
}

// assistantText joins the deltas of the assistant's text messages.
func assistantText(t *testing.T, frames []frame) string {
	t.Helper()
	assistant := map[string]bool{}
	var b strings.Builder
	for _, f := range frames {
		var ev struct {
			MessageID string `json:"messageId"`
			Role      string `json:"role"`
			Delta     string `json:"delta"`
		}
		switch f.event {
		case "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT":
			if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
				t.Fatalf("decode %s frame %s: %v", f.event, f.data, err)
			}
		default:
			continue
		}
		if f.event == "TEXT_MESSAGE_START" {
			assistant[ev.MessageID] = ev.Role == "assistant"
		} else if assistant[ev.MessageID] {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}
