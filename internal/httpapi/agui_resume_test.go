package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resumeBody is a RunAgentInput that answers interrupts with entries.
func resumeBody(t *testing.T, thread, run string, entries ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"threadId": thread, "runId": run, "messages": []any{}, "resume": entries})
	require.NoError(t, err)
	return string(b)
}

// interruptsOf returns the interrupts of the interrupt outcome frames end
// with.
func interruptsOf(t *testing.T, frames []frame) []map[string]any {
	t.Helper()
	end := frames[len(frames)-1]
	require.Equal(t, "RUN_FINISHED", end.event)
	assert.Equal(t, frames[len(frames)-2].id, end.id, "the interrupt outcome is not in the log: it takes the id before it")
	var ev struct {
		RunID   string
		Outcome struct {
			Type       string
			Interrupts []map[string]any
		}
	}
	require.NoError(t, json.Unmarshal([]byte(end.data), &ev))
	require.Equal(t, "interrupt", ev.Outcome.Type, end.data)
	return ev.Outcome.Interrupts
}

// A call that needs approval ends the AG-UI run on an interrupt; resume
// must answer every pending one, may not answer one decided natively, and
// streams the rest of the run under the client's new runId. The log stays
// one AG-UI run.
func TestAGUIApprovalInterrupt(t *testing.T) {
	ts := newServer(t, serverOptions{})
	frames := ts.aguiRun(t, "gated", aguiBody(t, "g1", "r1", userMsg("u1", "save")))
	interrupts := interruptsOf(t, frames)
	require.Len(t, interrupts, 2)
	first, second := interrupts[0]["id"].(string), interrupts[1]["id"].(string)
	assert.Equal(t, "tool_approval", interrupts[0]["reason"])
	assert.Equal(t, first, interrupts[0]["toolCallId"])
	assert.Contains(t, interrupts[0]["message"], "memory_set")

	// Only one answered: the other would be left waiting.
	res := ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g1", "r2", map[string]any{"interruptId": first, "status": "cancelled"}))
	assert.Equal(t, http.StatusBadRequest, res.status, string(res.body))
	assert.Contains(t, string(res.body), second)

	// The native route decides the first; resume may not decide it again.
	ts.must(t, http.StatusOK, "POST", "/sessions/g1/runs/r1/approvals/"+first, `{"decision":"approve"}`)
	both := []map[string]any{
		{"interruptId": first, "status": "cancelled"},
		{"interruptId": second, "status": "resolved", "payload": map[string]any{"decision": "approve"}},
	}
	res = ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g1", "r2", both...))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))
	assert.Contains(t, string(res.body), "interrupt_not_pending")

	frames = ts.aguiRun(t, "gated", resumeBody(t, "g1", "r2", both[1]))
	assert.Equal(t, "RUN_STARTED", frames[0].event)
	assert.Contains(t, frames[0].data, `"runId":"r2"`)
	end := frames[len(frames)-1]
	assert.Equal(t, "RUN_FINISHED", end.event)
	assert.Contains(t, end.data, `"runId":"r2","outcome":{"type":"success"}`)
	assert.Contains(t, end.data, `"kerneld":{"sessionId":"g1","runId":"r1"`, "metadata names kerneld's run")
	approvals := ts.must(t, http.StatusOK, "GET", "/sessions/g1/runs/r1/approvals", "")["data"].([]any)
	for _, a := range approvals {
		assert.Equal(t, "approved", a.(map[string]any)["state"])
	}
	verifyLog(t, ts, "g1")

	res = ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g1", "r3", both[1]))
	assert.Equal(t, http.StatusBadRequest, res.status, "nothing is pending any more: %s", res.body)
}
