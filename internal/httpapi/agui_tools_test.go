package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// toolsBody is a RunAgentInput offering tools.
func toolsBody(t *testing.T, thread, run string, tools []map[string]any, messages ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"threadId": thread, "runId": run, "protocolVersion": "1.0", "messages": messages, "tools": tools})
	require.NoError(t, err)
	return string(b)
}

func clientTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "the client's", "parameters": map[string]any{"type": "object"}}
}

// A client tool may not take the name of one of the agent's tools, and an
// agent file may refuse client tools altogether.
func TestAGUIClientToolsRefused(t *testing.T) {
	closed := `
name: closed
description: takes no client tools
model: {provider: scripted, script: [{text: "ok"}]}
client_tools: false
`
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: append(slices.Clone(kerneltest.DefaultAgents), closed)}})
	u := userMsg("u1", "hi")

	res := ts.do(t, "POST", "/agents/frontend/agui", toolsBody(t, "c1", "r1", []map[string]any{clientTool("page_title"), clientTool("current_time")}, u))
	assert.Equal(t, http.StatusBadRequest, res.status, string(res.body))
	assert.Contains(t, res.json(t)["errors"], "tools[1].name")
	assert.Contains(t, string(res.body), "current_time")

	res = ts.do(t, "POST", "/agents/closed/agui", toolsBody(t, "c2", "r1", []map[string]any{clientTool("page_title")}, u))
	assert.Equal(t, http.StatusUnprocessableEntity, res.status, string(res.body))
	assert.Equal(t, "client_tools_disabled", res.json(t)["code"])
	frames := ts.aguiRun(t, "closed", toolsBody(t, "c2", "r1", []map[string]any{}, u))
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event, "an empty list is no client tool")
}

// A client tool call ends the run; the thread then takes only a tool
// message answering it, which the model sees in the next run.
func TestAGUIClientToolRoundTrip(t *testing.T) {
	ts := newServer(t, serverOptions{})
	tools := []map[string]any{clientTool("page_title")}
	u1 := userMsg("u1", "which page?")
	frames := ts.aguiRun(t, "frontend", toolsBody(t, "f1", "r1", tools, u1))
	end := frames[len(frames)-1]
	require.Equal(t, "RUN_FINISHED", end.event)
	var callID string
	for _, f := range frames {
		require.NotEqual(t, "TOOL_CALL_RESULT", f.event, "kerneld ran the client's tool")
		var ev struct{ Type, ToolCallID, ToolCallName string }
		if f.data != "" && json.Unmarshal([]byte(f.data), &ev) == nil && ev.Type == "TOOL_CALL_START" {
			assert.Equal(t, "page_title", ev.ToolCallName)
			callID = ev.ToolCallID
		}
	}
	require.NotEmpty(t, callID)
	assert.Contains(t, end.data, `"outcome":{"type":"success","pendingToolCallIds":["`+callID+`"]}`)
	a1, _ := assistantOf(t, frames)
	kept := []map[string]any{u1, {"id": a1, "role": "assistant"}}

	// Not answered: a new user message alone would leave the call open.
	res := ts.do(t, "POST", "/agents/frontend/agui", toolsBody(t, "f1", "r2", tools, append(kept, userMsg("u2", "and?"))...))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))
	assert.Contains(t, string(res.body), callID)
	// Answering a call that does not wait.
	res = ts.do(t, "POST", "/agents/frontend/agui", toolsBody(t, "f1", "r2", tools,
		append(kept, map[string]any{"id": "t1", "role": "tool", "toolCallId": "nope", "content": "x"})...))
	assert.Equal(t, http.StatusConflict, res.status, string(res.body))

	result := map[string]any{"id": "t1", "role": "tool", "toolCallId": callID, "content": "Settings"}
	frames = ts.aguiRun(t, "frontend", toolsBody(t, "f1", "r2", tools, append(kept, result)...))
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event)
	_, text := assistantOf(t, frames)
	assert.Equal(t, "Got it.", text)
	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/f1/messages", "")["data"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	assert.Equal(t, []string{"user", "assistant", "tool", "assistant"}, roles)
	tool := msgs[2].(map[string]any)
	assert.Equal(t, "t1", tool["id"])
	assert.Equal(t, callID, tool["tool_call_id"])
	assert.Equal(t, "Settings", tool["content"])
	verifyLog(t, ts, "f1")
}
