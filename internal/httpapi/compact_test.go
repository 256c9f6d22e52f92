package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// summarising compacts only on demand, keeping two messages.
const summarising = `
name: summarising
model: {provider: scripted, script: [{text: "re: {input}"}], summary: "They counted."}
memory: {compaction: {at_messages: 100, keep_last: 2}}
`

func TestSessions_Compact(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: []string{summarising, kerneltest.Waiter}}})
	id := ts.createSession(t, "summarising")
	for _, in := range []string{"one", "two"} {
		ts.waitRun(t, id, ts.startRun(t, id, in))
	}

	got := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/compact", "")
	run := got["run"].(map[string]any)
	assert.Equal(t, "succeeded", run["state"])
	assert.Equal(t, "compaction", run["kind"])
	entry := got["compaction"].(map[string]any)
	assert.Equal(t, "compaction", entry["role"])
	assert.Equal(t, "They counted.", entry["content"])
	assert.Equal(t, map[string]any{
		"first_kept_position": float64(3), "messages_summarized": float64(2), "model": "", "cleared": false,
		"tokens_before": entry["compaction"].(map[string]any)["tokens_before"],
		"tokens_after":  entry["compaction"].(map[string]any)["tokens_after"],
	}, entry["compaction"])

	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages", "")["data"].([]any)
	var roles []any
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"])
	}
	assert.Equal(t, []any{"user", "assistant", "user", "assistant", "compaction"}, roles, "every message, and the entry")

	busy := ts.createSession(t, "waiter")
	ts.startRun(t, busy, "wait")
	<-ts.kernel.Wait.Started()
	res := ts.do(t, "POST", "/sessions/"+busy+"/compact", "")
	require.Equal(t, http.StatusConflict, res.status, "%s", res.body)
	assert.Equal(t, "session_busy", res.json(t)["code"])
	ts.kernel.Wait.Release()
}
