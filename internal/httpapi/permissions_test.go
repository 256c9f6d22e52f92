package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPermissionModes: a session's permission_mode is bounded by its
// agent's permission_modes; "always" from the decision route approves the
// tool's other calls waiting in the same turn and shows on the session.
func TestPermissionModes(t *testing.T) {
	ts := newServer(t, serverOptions{})
	agent := ts.must(t, http.StatusOK, "GET", "/agents/gated", "")
	assert.Equal(t, []any{"ask", "read_only_auto"}, agent["permission_modes"], "the default")

	wantProblem(t, ts.do(t, "POST", "/sessions", `{"agent":"gated","permission_mode":"auto"}`), http.StatusUnprocessableEntity, "permission_mode_not_allowed")
	wantProblem(t, ts.do(t, "POST", "/sessions", `{"agent":"gated","permission_mode":"sometimes"}`), http.StatusBadRequest, "invalid_request")
	created := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"gated","permission_mode":"read_only_auto"}`)
	assert.Equal(t, "read_only_auto", created["permission_mode"])
	id := created["id"].(string)
	wantProblem(t, ts.do(t, "PATCH", "/sessions/"+id, `{"permission_mode":"auto"}`), http.StatusUnprocessableEntity, "permission_mode_not_allowed")
	assert.Equal(t, "ask", ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"permission_mode":"ask"}`)["permission_mode"])

	run := ts.startRun(t, id, "save")
	base := "/sessions/" + id + "/runs/" + run + "/approvals"
	var pending []any
	deadline := time.Now().Add(10 * time.Second)
	for len(pending) < 2 {
		require.True(t, time.Now().Before(deadline), "the run never asked for approvals")
		pending = ts.must(t, http.StatusOK, "GET", base, "")["data"].([]any)
	}
	call := pending[0].(map[string]any)["tool_call_id"].(string)
	wantProblem(t, ts.do(t, "POST", base+"/"+call, `{"decision":"approve","same_arguments":true}`), http.StatusBadRequest, "invalid_request")
	assert.Equal(t, "approved", ts.must(t, http.StatusOK, "POST", base+"/"+call, `{"decision":"always"}`)["state"])
	require.Equal(t, "succeeded", ts.waitRun(t, id, run)["state"], "the other memory_set call needed no second decision")
	got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	assert.Equal(t, []any{map[string]any{"tool_name": "memory_set", "arguments": nil, "tool_call_id": call}}, got["always_approved"])
	all := ts.must(t, http.StatusOK, "GET", base, "")["data"].([]any)
	require.Len(t, all, 2)
	assert.Equal(t, "approved", all[1].(map[string]any)["state"])
	assert.Contains(t, all[1].(map[string]any)["reason"], "approved always in this session")
}
