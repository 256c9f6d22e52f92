package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

// TestApprovals: a gated run waits; GET lists the pending approvals; each
// is decided by POST; a second decision or a bad one is refused.
func TestApprovals(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "gated")
	run := ts.startRun(t, id, "save")
	base := "/sessions/" + id + "/runs/" + run + "/approvals"
	var pending []any
	deadline := time.Now().Add(10 * time.Second)
	for len(pending) < 2 || ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["state"] != "waiting_input" {
		if time.Now().After(deadline) {
			t.Fatal("the run never asked for approvals")
		}
		pending = ts.must(t, http.StatusOK, "GET", base, "")["data"].([]any)
	}
	first := pending[0].(map[string]any)
	if first["state"] != "pending" || first["tool_name"] != "memory_set" || first["expires_at"] == nil {
		t.Fatalf("approval = %v", first)
	}
	callA, callB := first["tool_call_id"].(string), pending[1].(map[string]any)["tool_call_id"].(string)

	wantProblem(t, ts.do(t, "POST", base+"/"+callA, `{"decision":"maybe"}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, ts.do(t, "POST", base+"/"+callA, `{}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, ts.do(t, "POST", base+"/call_nope", `{"decision":"approve"}`), http.StatusNotFound, "approval_not_found")
	if a := ts.must(t, http.StatusOK, "POST", base+"/"+callA, `{"decision":"approve"}`); a["state"] != "approved" {
		t.Errorf("decided = %v", a)
	}
	wantProblem(t, ts.do(t, "POST", base+"/"+callA, `{"decision":"deny"}`), http.StatusConflict, "approval_decided")
	if a := ts.must(t, http.StatusOK, "POST", base+"/"+callB, `{"decision":"deny","reason":"not now"}`); a["reason"] != "not now" {
		t.Errorf("decided = %v", a)
	}
	if r := ts.waitRun(t, id, run); r["state"] != "succeeded" {
		t.Fatalf("run ended %v", r["state"])
	}
	wantProblem(t, ts.do(t, "POST", base+"/"+callB, `{"decision":"approve"}`), http.StatusConflict, "approval_decided")
	wantProblem(t, ts.do(t, "GET", "/sessions/"+id+"/runs/"+id+"/approvals", ""), http.StatusNotFound, "run_not_found")
}
