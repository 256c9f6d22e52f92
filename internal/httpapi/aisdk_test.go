package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// Approver asks before one memory_set, then answers: the shape of an
// approval a useChat page answers with addToolApprovalResponse.
const approver = `
name: approver
description: saves a note once a person approves
model:
  provider: scripted
  script:
    - {text: "Saving.", tool_calls: [{name: memory_set, arguments: {key: note, value: "{input}"}}]}
    - {text: "Saved."}
tools: [{name: memory_set, require_approval: true}]
approval_timeout: 1h
`

// Reasoner reasons before it answers.
const reasoner = `
name: reasoner
description: reasons, then answers
model: {provider: scripted, script: [{reasoning: "weighing it", text: "yes"}]}
`

// aisdkAgents are the test kernel's agents plus approver and reasoner.
func aisdkAgents() []string {
	return append(append([]string{}, kerneltest.DefaultAgents...), approver, reasoner)
}

// chatBody is a DefaultChatTransport body: chat id, messages, trigger.
func chatBody(t *testing.T, id, trigger string, messages ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": id, "messages": messages, "trigger": trigger})
	require.NoError(t, err)
	return string(b)
}

// uiUser is a user UIMessage with one text part.
func uiUser(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "parts": []map[string]any{{"type": "text", "text": text}}}
}

// uiChunks reads a UI message stream's chunks; the last must be followed
// by [DONE].
func uiChunks(t *testing.T, res response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, "v1", res.header.Get("X-Vercel-AI-UI-Message-Stream"))
	var out []map[string]any
	done := false
	for _, f := range strings.Split(string(res.body), "\n\n") {
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &c), data)
		out = append(out, c)
	}
	require.True(t, done, "no [DONE] in %s", res.body)
	return out
}

// chunkText joins the deltas of the chunks of type typ.
func chunkText(chunks []map[string]any, typ string) string {
	var b strings.Builder
	for _, c := range chunks {
		if c["type"] == typ {
			b.WriteString(c["delta"].(string))
		}
	}
	return b.String()
}

func chunkTypes(chunks []map[string]any) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = c["type"].(string)
	}
	return out
}

func TestAISDKChatTwoTurns(t *testing.T) {
	ts := newServer(t, serverOptions{})
	chunks := uiChunks(t, ts.do(t, "POST", "/agents/echo/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "hello there"))))
	assert.Equal(t, []string{"start", "start-step", "text-start", "text-delta", "text-delta", "text-end", "finish-step", "finish"}, chunkTypes(chunks))
	assert.Equal(t, "answer:u1", chunks[0]["messageId"])
	assert.Equal(t, "hello there", chunkText(chunks, "text-delta"), "the input is sent once, as the echo agent's answer")
	assert.Equal(t, "stop", chunks[len(chunks)-1]["finishReason"])

	retry := ts.do(t, "POST", "/agents/echo/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "hello there")))
	assert.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
	assert.Equal(t, "hello there", chunkText(uiChunks(t, retry), "text-delta"), "a retry streams the same run again, not a new one")

	answer := map[string]any{"id": "answer:u1", "role": "assistant", "parts": []map[string]any{{"type": "step-start"}, {"type": "text", "text": "hello there"}}}
	chunks = uiChunks(t, ts.do(t, "POST", "/agents/echo/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "hello there"), answer, uiUser("u2", "again"))))
	assert.Equal(t, "answer:u2", chunks[0]["messageId"])
	assert.Equal(t, "again", chunkText(chunks, "text-delta"))

	var transcript []map[string]any
	require.NoError(t, json.Unmarshal(ts.do(t, "GET", "/sessions/c1/transcript", "").body, &transcript))
	require.Len(t, transcript, 4)
	assert.Equal(t, []any{"u1", "answer:u1", "u2", "answer:u2"}, []any{transcript[0]["id"], transcript[1]["id"], transcript[2]["id"], transcript[3]["id"]})
}

func TestAISDKChatRefusals(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: aisdkAgents()}})
	uiChunks(t, ts.do(t, "POST", "/agents/echo/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "hi"))))
	answer := map[string]any{"id": "answer:u1", "role": "assistant", "parts": []map[string]any{}}
	tests := []struct {
		name, body, code, field string
		status                  int
	}{
		{"no trigger", `{"id":"c1","messages":[]}`, "invalid_request", "trigger", 400},
		{"bad message", `{"id":"c1","trigger":"submit-message","messages":[{"id":"u1","role":"robot","parts":[]}]}`, "invalid_request", "messages[0].role", 400},
		{"regenerate without messageId", `{"id":"c1","trigger":"regenerate-message","messages":[]}`, "invalid_request", "messageId", 400},
		{"edited", chatBody(t, "c1", "submit-message", uiUser("u1", "HI"), answer, uiUser("u2", "x")), "history_conflict", "", 409},
		{"foreign assistant message", chatBody(t, "c1", "submit-message", uiUser("u1", "hi"), map[string]any{"id": "a9", "role": "assistant", "parts": []any{}}, uiUser("u2", "x")), "history_conflict", "", 409},
		{"removed", chatBody(t, "c1", "submit-message", uiUser("u2", "x")), "history_conflict", "", 409},
		{"nothing new", chatBody(t, "c1", "submit-message", uiUser("u1", "hi"), answer), "invalid_request", "messages", 400},
		{"another agent's chat", chatBody(t, "c1", "submit-message", uiUser("u1", "hi")), "session_exists", "", 409},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := "echo"
			if tt.code == "session_exists" {
				agent = "tooluser"
			}
			res := ts.do(t, "POST", "/agents/"+agent+"/ai-sdk", tt.body)
			require.Equal(t, tt.status, res.status, "%s", res.body)
			p := res.json(t)
			assert.Equal(t, tt.code, p["code"], "%s", res.body)
			if tt.field != "" {
				assert.Contains(t, p["errors"], tt.field, "%s", res.body)
			}
		})
	}
}

func TestAISDKChatApproval(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: aisdkAgents()}})
	chunks := uiChunks(t, ts.do(t, "POST", "/agents/approver/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "milk"))))
	last := chunks[len(chunks)-1]
	assert.Equal(t, "tool-calls", last["finishReason"])
	var call string
	for _, c := range chunks {
		if c["type"] == "tool-approval-request" {
			call = c["toolCallId"].(string)
			assert.Equal(t, call, c["approvalId"])
		}
	}
	require.NotEmpty(t, call, "no approval requested: %v", chunkTypes(chunks))

	part := func(id string, approved bool) map[string]any {
		return map[string]any{"type": "tool-memory_set", "toolCallId": id, "state": "approval-responded",
			"input": map[string]any{}, "approval": map[string]any{"id": id, "approved": approved}}
	}
	answer := func(p map[string]any) map[string]any {
		return map[string]any{"id": "answer:u1", "role": "assistant", "parts": []map[string]any{{"type": "step-start"}, p}}
	}
	res := ts.do(t, "POST", "/agents/approver/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "milk"), answer(part("call_other", true))))
	require.Equal(t, http.StatusConflict, res.status, "%s", res.body)
	assert.Equal(t, "approval_not_pending", res.json(t)["code"])
	assert.Contains(t, res.json(t)["detail"], "messages[1].parts[1]")

	chunks = uiChunks(t, ts.do(t, "POST", "/agents/approver/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "milk"), answer(part(call, true)))))
	assert.Equal(t, "answer:u1", chunks[0]["messageId"])
	assert.Contains(t, chunkTypes(chunks), "tool-output-available")
	assert.Equal(t, "Saved.", chunkText(chunks, "text-delta"))
	assert.Equal(t, "stop", chunks[len(chunks)-1]["finishReason"])
	assert.Equal(t, `"milk"`, string(mustJSON(t, ts.must(t, http.StatusOK, "GET", "/sessions/c1/memory/note", "")["value"])))
}

func TestAISDKStreamWhenIdle(t *testing.T) {
	ts := newServer(t, serverOptions{})
	assert.Equal(t, http.StatusNoContent, ts.do(t, "GET", "/agents/echo/ai-sdk/nochat/stream", "").status)
	uiChunks(t, ts.do(t, "POST", "/agents/echo/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "hi"))))
	assert.Equal(t, http.StatusNoContent, ts.do(t, "GET", "/agents/echo/ai-sdk/c1/stream", "").status)
	assert.Equal(t, http.StatusNotFound, ts.do(t, "GET", "/agents/tooluser/ai-sdk/c1/stream", "").status)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestAISDKChatMapsEveryKind(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: aisdkAgents()}})
	t.Run("reasoning", func(t *testing.T) {
		chunks := uiChunks(t, ts.do(t, "POST", "/agents/reasoner/ai-sdk", chatBody(t, "r1", "submit-message", uiUser("u1", "well?"))))
		assert.Equal(t, "weighing it", chunkText(chunks, "reasoning-delta"))
		assert.Equal(t, "yes", chunkText(chunks, "text-delta"))
		assert.Equal(t, []string{"start", "start-step", "reasoning-start"}, chunkTypes(chunks)[:3])
	})
	t.Run("child session", func(t *testing.T) {
		chunks := uiChunks(t, ts.do(t, "POST", "/agents/delegator/ai-sdk", chatBody(t, "d1", "submit-message", uiUser("u1", "ask"))))
		var states []any
		var ids []any
		for _, c := range chunks {
			if c["type"] == "data-kerneld-subagent" {
				data := c["data"].(map[string]any)
				states, ids = append(states, data["status"]), append(ids, c["id"])
			}
		}
		require.Len(t, states, 2, "%v", chunkTypes(chunks))
		assert.Equal(t, []any{"running", "finished"}, states)
		assert.Equal(t, ids[0], ids[1], "the child's part is updated in place")
		assert.Equal(t, "Asking echo.Echo answered.", chunkText(chunks, "text-delta"))
	})
	t.Run("tool error", func(t *testing.T) {
		chunks := uiChunks(t, ts.do(t, "POST", "/agents/clumsy/ai-sdk", chatBody(t, "e1", "submit-message", uiUser("u1", "try"))))
		assert.Contains(t, chunkTypes(chunks), "tool-output-error")
	})
	t.Run("cancelled", func(t *testing.T) {
		body := chatBody(t, "w1", "submit-message", uiUser("u1", "wait"))
		done := make(chan response, 1)
		go func() { // the stream ends with the run, which the test cancels
			res, err := ts.Client().Post(ts.URL+"/agents/waiter/ai-sdk", "application/json", strings.NewReader(body))
			if err != nil {
				done <- response{}
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body) // a short body fails the checks below
			done <- response{status: res.StatusCode, header: res.Header, body: b}
		}()
		<-ts.kernel.Wait.Started()
		sess := ts.must(t, http.StatusOK, "GET", "/sessions/w1", "")
		ts.must(t, http.StatusOK, "POST", "/sessions/w1/runs/"+sess["active_run_id"].(string)+"/cancel", "")
		chunks := uiChunks(t, <-done)
		types := chunkTypes(chunks)
		assert.Equal(t, []string{"abort", "finish"}, types[len(types)-2:])
		assert.Equal(t, "other", chunks[len(chunks)-1]["finishReason"])
	})
}
