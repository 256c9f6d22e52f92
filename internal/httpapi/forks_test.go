package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// messageContents lists the contents of a session's history.
func (ts *testServer) messageContents(t *testing.T, id string) []string {
	t.Helper()
	page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages?limit=200", "")
	var out []string
	for _, m := range page["data"].([]any) {
		out = append(out, m.(map[string]any)["content"].(string))
	}
	return out
}

func TestSessionFork(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	ts.waitRun(t, id, ts.startRun(t, id, "one"))
	ts.waitRun(t, id, ts.startRun(t, id, "two"))

	t.Run("at the first answer", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions/"+id+"/fork", `{"at_message": 2}`)
		if res.status != http.StatusCreated {
			t.Fatalf("fork = %d %s", res.status, res.body)
		}
		fork := res.json(t)
		forkID := fork["id"].(string)
		if got := res.header.Get("Location"); got != "/sessions/"+forkID {
			t.Errorf("Location = %q", got)
		}
		want := map[string]any{"session_id": id, "message_position": float64(2)}
		if got := fork["forked_from"]; !jsonEqual(got, want) {
			t.Errorf("forked_from = %v, want %v", got, want)
		}
		if got := ts.messageContents(t, forkID); strings.Join(got, ",") != "one,one" {
			t.Errorf("fork history = %v", got)
		}
		// Its stream, read from the start, is a valid AG-UI stream.
		ts.waitRun(t, forkID, ts.startRun(t, forkID, "three"))
		frames := ts.openStream(t, "GET", "/sessions/"+forkID+"/events", "").events(t, func(f frame) bool {
			return runEnded(f) && f.id > 3
		})
		if frames[0].id != 1 || frames[1].event != "MESSAGES_SNAPSHOT" || frames[2].event != "RUN_FINISHED" {
			t.Errorf("fork stream starts %d %s %s", frames[0].id, frames[1].event, frames[2].event)
		}
		aguitest.VerifyJSON(t, dataObjects(frames))
	})
	t.Run("the completed history, without a body", func(t *testing.T) {
		fork := ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/fork", "")
		if got := ts.messageContents(t, fork["id"].(string)); strings.Join(got, ",") != "one,one,two,two" {
			t.Errorf("fork history = %v", got)
		}
	})
	t.Run("lists forks", func(t *testing.T) {
		page := ts.must(t, http.StatusOK, "GET", "/sessions?forked_from="+id, "")
		if n := len(page["data"].([]any)); n != 2 {
			t.Fatalf("%d forks listed, want 2", n)
		}
		for _, s := range page["data"].([]any) {
			if from := s.(map[string]any)["forked_from"].(map[string]any)["session_id"]; from != id {
				t.Errorf("listed a session forked from %v", from)
			}
		}
	})
	t.Run("refuses", func(t *testing.T) {
		for _, tt := range []struct {
			body   string
			status int
			code   string
		}{
			{`{"at_message": -1}`, http.StatusBadRequest, "invalid_request"},
			{`{"at_message": "2"}`, http.StatusBadRequest, "invalid_request"},
			{`{"position": 2}`, http.StatusBadRequest, "invalid_request"},
			{`{"at_message": 5}`, http.StatusUnprocessableEntity, "message_not_found"},
		} {
			wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/fork", tt.body), tt.status, tt.code)
		}
		wantProblem(t, ts.do(t, "POST", "/sessions/"+specSessionID+"/fork", ""), http.StatusNotFound, "session_not_found")
	})
}

func TestRunRegenerate(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	ts.waitRun(t, id, ts.startRun(t, id, "one"))
	second := ts.startRun(t, id, "two")
	ts.waitRun(t, id, second)

	res := ts.do(t, "POST", "/sessions/"+id+"/runs/"+second+"/regenerate", "")
	if res.status != http.StatusAccepted {
		t.Fatalf("regenerate = %d %s", res.status, res.body)
	}
	body := res.json(t)
	fork, run := body["session"].(map[string]any), body["run"].(map[string]any)
	forkID := fork["id"].(string)
	if run["session_id"] != forkID || run["input"] != "two" {
		t.Errorf("run = %v, want input two in session %s", run, forkID)
	}
	if got := fork["forked_from"].(map[string]any)["message_position"]; got != float64(2) {
		t.Errorf("forked at %v, want 2", got)
	}
	ts.waitRun(t, forkID, run["id"].(string))
	if got := ts.messageContents(t, forkID); strings.Join(got, ",") != "one,one,two,two" {
		t.Errorf("regenerated history = %v", got)
	}
	wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/runs/"+specRunID+"/regenerate", ""), http.StatusNotFound, "run_not_found")
}

func TestSessionClose(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "slow")
	runID := ts.startRun(t, id, "talk")
	stream := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
	waitSeq(t, ts, id, 6)

	closed := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/close", `{"reason":"user left"}`)
	if closed["state"] != "closed" || closed["closed_reason"] != "user left" {
		t.Fatalf("closed session = %v", closed)
	}
	frames := stream.events(t, nil) // to EOF: the stream ends after the final event
	if last := frames[len(frames)-1]; last.event != "RUN_FINISHED" || !strings.Contains(last.data, `"cancelled"`) {
		t.Errorf("last frame = %s %s, want a cancelled RUN_FINISHED", last.event, last.data)
	}
	aguitest.VerifyJSON(t, dataObjects(frames))
	if run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, ""); run["state"] != "cancelled" {
		t.Errorf("run state = %v, want cancelled", run["state"])
	}

	for _, req := range []struct{ method, path, body string }{
		{"PATCH", "/sessions/" + id, `{"name":"x"}`},
		{"POST", "/sessions/" + id + "/run", `{"input":"more"}`},
		{"PUT", "/sessions/" + id + "/memory/k", `{"value":1}`},
		{"DELETE", "/sessions/" + id + "/memory/k", ""},
	} {
		wantProblem(t, ts.do(t, req.method, req.path, req.body), http.StatusConflict, "session_closed")
	}
	again := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/close", "")
	if again["closed_reason"] != "user left" {
		t.Errorf("closing again changed closed_reason to %v", again["closed_reason"])
	}
	ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages", "")
	ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/fork", "{}")
	ts.must(t, http.StatusNoContent, "DELETE", "/sessions/"+id, "")

	other := ts.createSession(t, "echo")
	long := `{"reason":"` + strings.Repeat("x", 1025) + `"}`
	wantProblem(t, ts.do(t, "POST", "/sessions/"+other+"/close", long), http.StatusBadRequest, "invalid_request")
	wantProblem(t, ts.do(t, "POST", "/sessions/"+other+"/close", `{"why":"x"}`), http.StatusBadRequest, "invalid_request")
}

// jsonEqual reports whether a and b encode to the same JSON.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
