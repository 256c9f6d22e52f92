package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/kernel"
)

func TestSessionState(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	if got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/state", ""); got["state"] != nil {
		t.Errorf("state before any = %v, want null", got["state"])
	}
	put := ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/state", `{"state":{"todo":["a","b"],"step":2}}`)
	if got := compactJSON(t, mustJSON(t, put["state"])); got != `{"step":2,"todo":["a","b"]}` {
		t.Errorf("PUT answered state %s", got)
	}
	got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/state", "")
	if s := compactJSON(t, mustJSON(t, got["state"])); s != `{"step":2,"todo":["a","b"]}` {
		t.Errorf("GET state = %s", s)
	}

	t.Run("NextRunStartsWithIt", func(t *testing.T) {
		run := ts.startRun(t, id, "go")
		ts.waitRun(t, id, run)
		frames := ts.openStream(t, "GET", "/sessions/"+id+"/events", "").events(t, runEnded)
		var snaps []string
		for _, f := range frames {
			if f.event == "STATE_SNAPSHOT" {
				snaps = append(snaps, f.data)
			}
		}
		if len(snaps) != 1 || !strings.Contains(snaps[0], `"snapshot":{"todo":["a","b"],"step":2}`) {
			t.Errorf("STATE_SNAPSHOT frames = %q, want one with the state", snaps)
		}
		second := ts.startRun(t, id, "again")
		ts.waitRun(t, id, second)
		for _, f := range ts.openStream(t, "GET", "/sessions/"+id+"/events?run_id="+second, "").events(t, runEnded) {
			if f.event == "STATE_SNAPSHOT" {
				t.Errorf("the run after sent the state again: %s", f.data)
			}
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		wantProblem(t, ts.do(t, "PUT", "/sessions/"+id+"/state", `{}`), http.StatusBadRequest, "invalid_request")
		big := `{"state":"` + strings.Repeat("x", kernel.MaxStateBytes) + `"}`
		p := wantProblem(t, ts.do(t, "PUT", "/sessions/"+id+"/state", big), http.StatusBadRequest, "invalid_request")
		if !strings.Contains(p["detail"].(string), "262144") {
			t.Errorf("detail %q does not name the limit", p["detail"])
		}
		wantProblem(t, ts.do(t, "PUT", "/sessions/nope/state", `{"state":1}`), http.StatusNotFound, "session_not_found")
		ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/close", "")
		wantProblem(t, ts.do(t, "PUT", "/sessions/"+id+"/state", `{"state":1}`), http.StatusConflict, "session_closed")
	})
}
