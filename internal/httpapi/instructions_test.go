package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestSession_Instructions(t *testing.T) {
	ts := newServer(t, serverOptions{})
	s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","instructions":"Answer in French."}`)
	if s["instructions"] != "Answer in French." {
		t.Errorf("created with instructions %v", s["instructions"])
	}
	id := s["id"].(string)
	p := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"instructions":"Answer in German."}`)
	if p["instructions"] != "Answer in German." {
		t.Errorf("PATCH answered instructions %v", p["instructions"])
	}
	ts.waitRun(t, id, ts.startRun(t, id, "hi")) // the run reads them
	ctx := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages", "")["context"].(map[string]any)
	// echo has no system prompt of its own: the instructions are all of it.
	if ctx["instructions"] != "Answer in German." || ctx["system_prompt"] != "" || ctx["system"] != "Answer in German." {
		t.Errorf("/messages' context = %v, want the agent's (empty) prompt with the session's instructions", ctx)
	}
	if got := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"instructions":""}`)["instructions"]; got != nil {
		t.Errorf("cleared instructions = %v, want null", got)
	}
	if ctx := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages", "")["context"].(map[string]any); ctx["instructions"] != nil || ctx["system"] != ctx["system_prompt"] {
		t.Errorf("/messages' context without instructions = %v, want the agent's prompt alone", ctx)
	}
	big := `{"agent":"echo","instructions":"` + strings.Repeat("x", 16<<10+1) + `"}`
	res := wantProblem(t, ts.do(t, "POST", "/sessions", big), http.StatusBadRequest, "invalid_request")
	if !strings.Contains(res["detail"].(string), "16384") {
		t.Errorf("detail %q does not name the limit", res["detail"])
	}
}
