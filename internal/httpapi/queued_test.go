package httpapi_test

import (
	"net/http"
	"testing"
)

// TestSession_QueuedRuns counts the runs waiting behind one that waits
// for an approval, in GET and in the list.
func TestSession_QueuedRuns(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "gated")
	ts.startRun(t, id, "save")
	if got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["queued_runs"]; got != 0.0 {
		t.Errorf("queued_runs with one run active = %v, want 0", got)
	}
	for range 2 {
		ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"later","if_busy":"queue"}`)
	}
	if got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["queued_runs"]; got != 2.0 {
		t.Errorf("GET queued_runs = %v, want 2", got)
	}
	for _, item := range ts.must(t, http.StatusOK, "GET", "/sessions", "")["data"].([]any) {
		if s := item.(map[string]any); s["id"] == id && s["queued_runs"] != 2.0 {
			t.Errorf("listed queued_runs = %v, want 2", s["queued_runs"])
		}
	}
}

// TestRun_Source records where each run's input came from.
func TestRun_Source(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	for _, c := range []struct{ body, want string }{
		{`{"input":"a"}`, "api"},
		{`{"input":"b","source":"cli"}`, "cli"},
		{`{"input":"c","source":"console"}`, "console"},
	} {
		run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", c.body)
		if run["source"] != c.want {
			t.Errorf("run of %s: source %v, want %s", c.body, run["source"], c.want)
		}
		ts.waitRun(t, id, run["id"].(string))
	}
	wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"d","source":"schedule"}`), http.StatusBadRequest, "invalid_request")
	one := ts.must(t, http.StatusAccepted, "POST", "/run", `{"agent":"echo","input":"e","source":"cli"}`)
	if one["source"] != "cli" {
		t.Errorf("POST /run source = %v, want cli", one["source"])
	}
	ts.aguiRun(t, "echo", aguiBody(t, "thread-src", "run-src", userMsg("u1", "hi")))
	if got := ts.must(t, http.StatusOK, "GET", "/sessions/thread-src/runs/run-src", "")["source"]; got != "agui" {
		t.Errorf("AG-UI run source = %v, want agui", got)
	}
}
