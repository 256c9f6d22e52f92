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
