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
	b, err := json.Marshal(map[string]any{"threadId": thread, "runId": run, "protocolVersion": "1.0", "messages": []any{}, "resume": entries})
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
	assert.Equal(t, http.StatusConflict, res.status, "nothing is pending any more: %s", res.body)
	assert.Equal(t, "interrupt_not_pending", res.json(t)["code"])
}

// approveAll answers every interrupt with an approval.
func approveAll(interrupts []map[string]any) []map[string]any {
	out := make([]map[string]any, len(interrupts))
	for i, in := range interrupts {
		out[i] = map[string]any{"interruptId": in["id"], "status": "resolved", "payload": map[string]any{"decision": "approve"}}
	}
	return out
}

// logLength is the number of events in a session's log.
func logLength(t *testing.T, ts *testServer, id string) int {
	t.Helper()
	return len(ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/events?limit=1000", "", "Accept", "application/json")["data"].([]any))
}

// CopilotKit's useInterrupt answers under the interrupted run's own
// runId: that is the answer, not a retry to replay. The same answer again
// is refused, by any runId, and replays nothing.
func TestAGUIResumeUnderInterruptedRunID(t *testing.T) {
	ts := newServer(t, serverOptions{})
	answers := approveAll(interruptsOf(t, ts.aguiRun(t, "gated", aguiBody(t, "g2", "r1", userMsg("u1", "save")))))

	st := ts.openStream(t, "POST", "/agents/gated/agui", resumeBody(t, "g2", "r1", answers...))
	frames := st.events(t, runEnded)
	st.close()
	assert.Empty(t, st.res.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "RUN_STARTED", frames[0].event)
	assert.Contains(t, frames[0].data, `"runId":"r1"`)
	end := frames[len(frames)-1]
	require.Equal(t, "RUN_FINISHED", end.event)
	assert.Contains(t, end.data, `"runId":"r1","outcome":{"type":"success"}`)
	_, text := assistantOf(t, frames)
	assert.Equal(t, "Done.", text)
	for _, key := range []string{"a", "b"} {
		ts.must(t, http.StatusOK, "GET", "/sessions/g2/memory/"+key, "")
	}
	verifyLog(t, ts, "g2")

	events := logLength(t, ts, "g2")
	for _, runID := range []string{"r1", "r9"} {
		res := ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g2", runID, answers...))
		assert.Equal(t, http.StatusConflict, res.status, "%s: %s", runID, res.body)
		assert.Equal(t, "application/problem+json", res.header.Get("Content-Type"))
		assert.Empty(t, res.header.Get("Idempotent-Replayed"), runID)
		p := res.json(t)
		assert.Equal(t, "interrupt_not_pending", p["code"])
		assert.Contains(t, p["detail"], "already answered (approved at ")
	}
	assert.Equal(t, events, logLength(t, ts, "g2"), "a refused answer adds nothing to the log")
}

// An answer to an interrupt of an earlier run, or to one never asked, is
// a conflict that says which; the interrupts the thread does wait on stay
// answerable.
func TestAGUIResumeAnotherRunsInterrupt(t *testing.T) {
	ts := newServer(t, serverOptions{})
	u1, u2 := userMsg("u1", "save"), userMsg("u2", "save again")
	old := approveAll(interruptsOf(t, ts.aguiRun(t, "gated", aguiBody(t, "g3", "r1", u1))))
	ts.must(t, http.StatusOK, "POST", "/sessions/g3/runs/r1/cancel", "")

	res := ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g3", "r1", old...))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))
	assert.Contains(t, res.json(t)["detail"], "the run ended before a decision")

	frames := ts.aguiRun(t, "gated", aguiBody(t, "g3", "r2", u2))
	current := approveAll(interruptsOf(t, frames))
	res = ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g3", "r2", old...))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))
	assert.Contains(t, res.json(t)["detail"], "of run r1 can no longer be answered")
	res = ts.do(t, "POST", "/agents/gated/agui", resumeBody(t, "g3", "r2",
		map[string]any{"interruptId": "made-up", "status": "cancelled"}))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))
	assert.Contains(t, res.json(t)["detail"], `"made-up" is not one this thread waits on; it waits on `+current[0]["interruptId"].(string))

	frames = ts.aguiRun(t, "gated", resumeBody(t, "g3", "r2", current...))
	assert.Contains(t, frames[len(frames)-1].data, `"outcome":{"type":"success"}`)

	res = ts.do(t, "POST", "/agents/echo/agui", resumeBody(t, "fresh", "r1", map[string]any{"interruptId": "i", "status": "cancelled"}))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))
	assert.Contains(t, res.json(t)["detail"], `"i" was never asked on this thread, and it waits on no interrupt`)
}
