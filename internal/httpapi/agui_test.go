package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// aguiBody is a RunAgentInput as HttpAgent 1.0 builds it.
func aguiBody(t *testing.T, thread, run string, messages ...map[string]any) string {
	t.Helper()
	if messages == nil {
		messages = []map[string]any{}
	}
	b, err := json.Marshal(map[string]any{
		"threadId": thread, "runId": run, "protocolVersion": "1.0", "messages": messages, "tools": []any{},
		"context": []any{}, "state": map[string]any{}, "forwardedProps": map[string]any{},
	})
	require.NoError(t, err)
	return string(b)
}

func userMsg(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": text}
}

// aguiRun posts a RunAgentInput and reads the whole stream.
func (ts *testServer) aguiRun(t *testing.T, agent, body string, header ...string) []frame {
	t.Helper()
	st := ts.openStream(t, "POST", "/agents/"+agent+"/agui", body, header...)
	defer st.close()
	return st.events(t, runEnded)
}

// assistantOf returns the id and text of the assistant message in frames.
func assistantOf(t *testing.T, frames []frame) (id, text string) {
	t.Helper()
	for _, f := range frames {
		if f.data == "" {
			continue // an elided event
		}
		var ev struct{ Type, MessageID, Role, Delta string }
		require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
		switch {
		case ev.Type == "TEXT_MESSAGE_START" && ev.Role == "assistant":
			id = ev.MessageID
		case ev.Type == "TEXT_MESSAGE_CONTENT" && ev.MessageID == id:
			text += ev.Delta
		}
	}
	require.NotEmpty(t, id, "no assistant message")
	return id, text
}

func TestAGUIRunTwoTurns(t *testing.T) {
	ts := newServer(t, serverOptions{})
	u1 := userMsg("u1", "first")
	frames := ts.aguiRun(t, "echo", aguiBody(t, "thread-a", "run-1", u1))
	require.NotEmpty(t, frames)
	types := make([]string, len(frames))
	for i, f := range frames {
		types[i] = f.event
	}
	assert.Equal(t, []string{"RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START", "", "TEXT_MESSAGE_END"}, types[:5],
		"the client's own message is echoed by id, its content elided to an id line")
	assert.Equal(t, frame{id: frames[3].id}, frames[3])
	assert.Contains(t, frames[0].data, `"threadId":"thread-a","runId":"run-1"`)
	assert.Contains(t, frames[2].data, `"messageId":"u1","role":"user"`)
	assert.Equal(t, "RUN_FINISHED", types[len(types)-1])
	a1, text := assistantOf(t, frames)
	assert.Contains(t, text, "first")
	verifyLog(t, ts, "thread-a")

	// The second turn echoes the history back, as a stock client does.
	second := aguiBody(t, "thread-a", "run-2", u1, map[string]any{"id": a1, "role": "assistant", "content": text},
		userMsg("u2", "second"))
	frames = ts.aguiRun(t, "echo", second)
	_, text = assistantOf(t, frames)
	assert.Contains(t, text, "second")
	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/thread-a/messages", "")["data"].([]any)
	require.Len(t, msgs, 4)
	assert.Equal(t, "u2", msgs[2].(map[string]any)["id"])
	run := ts.must(t, http.StatusOK, "GET", "/sessions/thread-a/runs/run-2", "")
	assert.Equal(t, "second", run["input"])

	// A repeated runId replays its run: the same events, nothing new.
	again := ts.aguiRun(t, "echo", second)
	assert.Equal(t, dataObjects(frames), dataObjects(again))
	assert.Len(t, ts.must(t, http.StatusOK, "GET", "/sessions/thread-a/messages", "")["data"], 4)

	// A thread of another agent is a conflict.
	res := ts.do(t, "POST", "/agents/tooluser/agui", aguiBody(t, "thread-a", "run-3", userMsg("u3", "x")))
	assert.Equal(t, http.StatusConflict, res.status)
	assert.Equal(t, "session_exists", res.json(t)["code"])
}

func TestAGUIRunContradictingHistory(t *testing.T) {
	ts := newServer(t, serverOptions{})
	u1, u2 := userMsg("u1", "first"), userMsg("u2", "second")
	_, t1 := assistantOf(t, ts.aguiRun(t, "echo", aguiBody(t, "th", "r1", u1)))
	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/th/messages", "")["data"].([]any)
	a1 := map[string]any{"id": msgs[1].(map[string]any)["id"], "role": "assistant", "content": t1}
	ts.aguiRun(t, "echo", aguiBody(t, "th", "r2", u1, a1, u2))
	msgs = ts.must(t, http.StatusOK, "GET", "/sessions/th/messages", "")["data"].([]any)
	a2 := map[string]any{"id": msgs[3].(map[string]any)["id"], "role": "assistant"}

	for name, messages := range map[string][]map[string]any{
		"edited":          {userMsg("u1", "changed"), a1, u2, a2, userMsg("u3", "x")},
		"removed":         {u1, u2, a2, userMsg("u3", "x")},
		"reordered":       {u1, u2, a1, a2, userMsg("u3", "x")},
		"inserted":        {u1, userMsg("u9", "new"), a1, u2, a2},
		"foreign message": {u1, a1, u2, a2, {"id": "a9", "role": "assistant", "content": "made up"}, userMsg("u3", "x")},
	} {
		res := ts.do(t, "POST", "/agents/echo/agui", aguiBody(t, "th", "r-"+strings.ReplaceAll(name, " ", "-"), messages...))
		assert.Equal(t, http.StatusConflict, res.status, "%s: %s", name, res.body)
		assert.Equal(t, "history_conflict", res.json(t)["code"], name)
		assert.Equal(t, "application/problem+json", res.header.Get("Content-Type"), name)
	}
	// Only the new message, without the history, is fine: kerneld has it.
	frames := ts.aguiRun(t, "echo", aguiBody(t, "th", "r3", userMsg("u3", "third")))
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event)
}

func TestAGUIRunMalformedInput(t *testing.T) {
	ts := newServer(t, serverOptions{})
	ok := `"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}]`
	for field, body := range map[string]string{
		"body":                           `[]`,
		"threadId":                       `{"runId":"r","messages":[]}`,
		"threadId ":                      `{"threadId":"a b","runId":"r","messages":[]}`,
		"threadId  ":                     `{"threadId":7,"runId":"r","messages":[]}`,
		"runId":                          `{"threadId":"t","messages":[]}`,
		"runId ":                         `{"threadId":"t","runId":"` + strings.Repeat("r", 129) + `","messages":[]}`,
		"messages":                       `{"threadId":"t","runId":"r"}`,
		"messages ":                      `{"threadId":"t","runId":"r","messages":{}}`,
		"messages[0]":                    `{"threadId":"t","runId":"r","messages":[7]}`,
		"messages[0].id":                 `{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`,
		"messages[0].role":               `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"robot","content":"x"}]}`,
		"messages[0].content":            `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":7}]}`,
		"messages[0].toolCallId":         `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"tool","content":"x"}]}`,
		"messages[1]":                    `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x"},{"id":"v","role":"user","content":"y"}]}`,
		"messages  ":                     `{"threadId":"t","runId":"r","messages":[]}`,
		"context[0]":                     `{` + ok + `,"context":[{"description":"d"}]}`,
		"tools[0]":                       `{` + ok + `,"tools":[7]}`,
		"tools[0].name":                  `{` + ok + `,"tools":[{"name":"a b","description":"d"}]}`,
		"tools[0].description":           `{` + ok + `,"tools":[{"name":"x"}]}`,
		"tools[0].parameters":            `{` + ok + `,"tools":[{"name":"x","description":"d","parameters":[1]}]}`,
		"tools[1].name":                  `{` + ok + `,"tools":[{"name":"x","description":"d"},{"name":"x","description":"e"}]}`,
		"resume[0].payload":              `{` + ok + `,"resume":[{"interruptId":"i","status":"resolved"}]}`,
		"resume[0].payload ":             `{` + ok + `,"resume":[{"interruptId":"i","status":"resolved","payload":{"decision":"approve","why":"x"}}]}`,
		"resume[0].payload.decision":     `{` + ok + `,"resume":[{"interruptId":"i","status":"resolved","payload":{"decision":"maybe"}}]}`,
		"resume[0].status":               `{` + ok + `,"resume":[{"interruptId":"i","status":"later"}]}`,
		"resume[0].interruptId":          `{` + ok + `,"resume":[{"status":"cancelled"}]}`,
		"resume[0]":                      `{` + ok + `,"resume":[7]}`,
		"forwardedProps.kerneld":         `{` + ok + `,"forwardedProps":{"kerneld":{"model":"x"}}}`,
		"forwardedProps.kerneld.if_busy": `{` + ok + `,"forwardedProps":{"kerneld":{"if_busy":"later"}}}`,
	} {
		res := ts.doWithin(t, 5e9, "POST", "/agents/echo/agui", body, "Accept", "text/event-stream")
		assert.Equal(t, http.StatusBadRequest, res.status, "%s: %s", field, res.body)
		assert.Equal(t, "application/problem+json", res.header.Get("Content-Type"), field)
		p := res.json(t)
		want := strings.TrimSpace(field)
		if errs, ok := p["errors"].(map[string]any); ok && want != "body" {
			assert.Contains(t, errs, want, "%s: %s", field, res.body)
		} else {
			assert.Contains(t, string(res.body), want, field)
		}
	}
	res := ts.do(t, "POST", "/agents/nope/agui", `{"threadId":"t2","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusNotFound, res.status)
	// Members AG-UI may add later are ignored.
	frames := ts.aguiRun(t, "echo", `{`+ok+`,"parentRunId":"p","someFutureField":{"x":1}}`)
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event)
}

func TestAGUIRunContextStateAndTenants(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
	acme, other := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}
	body := `{"threadId":"same","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}],` +
		`"state":{"count":3},"context":[{"description":"page","value":"/settings"}],"forwardedProps":{"kerneld":{"if_busy":"queue"}}}`
	frames := ts.aguiRun(t, "echo", body, acme...)
	assert.Equal(t, "STATE_SNAPSHOT", frames[1].event)
	assert.Contains(t, frames[1].data, `"snapshot":{"count":3}`)
	frames = ts.aguiRun(t, "tooluser", aguiBody(t, "same", "r1", userMsg("u1", "hello")), other...)
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event)
	assert.Equal(t, "echo", ts.must(t, http.StatusOK, "GET", "/sessions/same", "", acme...)["agent"])
	assert.Equal(t, "tooluser", ts.must(t, http.StatusOK, "GET", "/sessions/same", "", other...)["agent"])
}

// verifyLog checks the whole log of a session with the AG-UI checker.
func verifyLog(t *testing.T, ts *testServer, id string) {
	t.Helper()
	page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/events", "", "Accept", "application/json")
	var objects [][]byte
	for _, ev := range page["data"].([]any) {
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		objects = append(objects, b)
	}
	aguitest.VerifyJSON(t, objects)
}

// A stock HttpAgent, the official AG-UI client, holds a conversation
// with kerneld (test/agui/httpagent.mjs): the 1.0.0 client, and 0.0.59,
// the one every CopilotKit package pins.
func TestAGUIWithHttpAgent(t *testing.T) {
	for _, version := range []string{"1.0.0", "0.0.59"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
			aguitest.RunScript(t, "httpagent.mjs", ts.URL, "k1", "k2", version)
		})
	}
}
