package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// TestInbox: the approvals waiting in three sessions are listed together,
// paged, in the caller's tenant only; one decided from the inbox leaves
// it, and the run goes on as when decided from its own route.
func TestInbox(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
	acme, other := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}
	sessions := map[string]string{} // session → run
	for range 3 {
		id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"gated"}`, acme...)["id"].(string)
		sessions[id] = ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"save"}`, acme...)["id"].(string)
	}
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acme...)
	var items []any
	deadline := time.Now().Add(10 * time.Second)
	for len(items) < 6 {
		require.True(t, time.Now().Before(deadline), "the inbox never showed the six approvals: %v", items)
		items = ts.must(t, http.StatusOK, "GET", "/approvals?state=pending", "", acme...)["data"].([]any)
	}
	require.Len(t, items, 6, "two memory_set calls in each of three sessions")
	for _, it := range items {
		item := it.(map[string]any)
		assert.Equal(t, sessions[item["session_id"].(string)], item["run_id"], "each item names its session's run")
		assert.Equal(t, "memory_set", item["tool_name"])
		assert.Equal(t, "gated", item["agent"])
		assert.Equal(t, "pending", item["state"])
		assert.NotNil(t, item["expires_at"])
		assert.Contains(t, item["arguments"], "key")
	}
	assert.Empty(t, ts.must(t, http.StatusOK, "GET", "/approvals", "", other...)["data"], "another tenant's inbox is its own")
	assert.Empty(t, ts.must(t, http.StatusOK, "GET", "/approvals?agent=echo", "", acme...)["data"])

	first := ts.must(t, http.StatusOK, "GET", "/approvals?limit=4", "", acme...)
	require.Len(t, first["data"], 4)
	require.NotNil(t, first["next_cursor"])
	second := ts.must(t, http.StatusOK, "GET", "/approvals?limit=4&cursor="+url.QueryEscape(first["next_cursor"].(string)), "", acme...)
	require.Len(t, second["data"], 2)
	assert.Nil(t, second["next_cursor"])
	assert.Equal(t, items, append(first["data"].([]any), second["data"].([]any)...), "the pages make the whole inbox, in order")

	// Decide every call of one session from the inbox: they leave it and its run ends.
	one := items[0].(map[string]any)
	sid, rid := one["session_id"].(string), one["run_id"].(string)
	for _, it := range items {
		if item := it.(map[string]any); item["session_id"] == sid {
			ts.must(t, http.StatusOK, "POST", "/sessions/"+sid+"/runs/"+rid+"/approvals/"+item["tool_call_id"].(string),
				`{"decision":"approve"}`, acme...)
		}
	}
	left := ts.must(t, http.StatusOK, "GET", "/approvals", "", acme...)["data"].([]any)
	assert.Len(t, left, 4)
	for _, it := range left {
		assert.NotEqual(t, sid, it.(map[string]any)["session_id"])
	}

	wantProblem(t, ts.do(t, "GET", "/approvals?state=approved", "", acme...), http.StatusBadRequest, "invalid_request")
	wantProblem(t, ts.do(t, "GET", "/approvals?cursor=nope", "", acme...), http.StatusBadRequest, "invalid_request")
	wantProblem(t, ts.do(t, "GET", "/approvals?session=x", "", acme...), http.StatusBadRequest, "unknown_parameter")
}
