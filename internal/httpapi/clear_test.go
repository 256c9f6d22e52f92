package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
)

// recordingModels builds the scripted models of agent files whose
// provider is "recording", and records every request they get.
type recordingModels struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *recordingModels) build(cfg llm.ModelConfig) (llm.Provider, error) {
	inner, err := scripted.New(cfg)
	if err != nil {
		return nil, err
	}
	return recordingModel{inner: inner, into: m}, nil
}

// lastUserInputs returns the user messages of the latest request.
func (m *recordingModels) lastUserInputs(t *testing.T) []string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NotEmpty(t, m.reqs, "the model was never called")
	var out []string
	for _, msg := range m.reqs[len(m.reqs)-1].Messages {
		if msg.Role == llm.RoleUser {
			out = append(out, msg.Content)
		}
	}
	return out
}

// lastSystem returns the system prompt of the latest request.
func (m *recordingModels) lastSystem() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1].System
}

type recordingModel struct {
	inner llm.Provider
	into  *recordingModels
}

func (p recordingModel) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	req.Messages = slices.Clone(req.Messages)
	p.into.mu.Lock()
	p.into.reqs = append(p.into.reqs, req)
	p.into.mu.Unlock()
	return p.inner.Stream(ctx, req, emit)
}

// remembering echoes its input, and has the memory tools.
const remembering = `
name: remembering
model: {provider: recording, script: [{text: "re: {input}"}]}
tools: [memory_get, memory_set]
`

// clearServer serves tenants acme (k1) and other (k2) with the feed, on a
// store of the named kind, with the remembering agent's model recorded.
func clearServer(t *testing.T, store string) (*testServer, *recordingModels) {
	models := &recordingModels{}
	ts := newServer(t, serverOptions{feed: true,
		api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}},
		kernel: kerneltest.Options{
			Store:     openStore(t, store),
			Agents:    []string{remembering, kerneltest.Waiter},
			Providers: map[string]llm.Factory{"recording": models.build},
		}})
	return ts, models
}

// roles lists the roles of session id's history as /messages shows it.
func (ts *testServer) roles(t *testing.T, id string, auth []string) []string {
	t.Helper()
	var out []string
	for _, m := range ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages?limit=200", "", auth...)["data"].([]any) {
		out = append(out, m.(map[string]any)["role"].(string))
	}
	return out
}

func TestSessions_Clear(t *testing.T) {
	for _, store := range []string{"memory", "sqlite"} {
		t.Run(store, func(t *testing.T) { testClear(t, store) })
	}
}

func testClear(t *testing.T, store string) {
	ts, models := clearServer(t, store)
	k1, k2 := acmeKey, otherKey
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"remembering"}`, k1...)["id"].(string)
	ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/memory/city", `{"value":"Lyon"}`, k1...)
	ranOnce(t, ts, id, "one", k1)
	ranOnce(t, ts, id, "two", k1)
	require.Equal(t, []string{"one", "two"}, models.lastUserInputs(t))
	unread, _ := unreadAs(t, ts, id, k1)
	require.Equal(t, float64(2), unread, "two answers unread before the clear")
	feed := ts.openStream(t, "GET", "/sessions/events", "", k1...)

	got := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/clear", "", k1...)
	run := got["run"].(map[string]any)
	assert.Equal(t, "succeeded", run["state"])
	assert.Equal(t, "clear", run["kind"])
	entry := got["clear"].(map[string]any)
	assert.Equal(t, "compaction", entry["role"])
	assert.Equal(t, "", entry["content"])
	assert.Equal(t, true, entry["compaction"].(map[string]any)["cleared"])
	assert.Equal(t, float64(4), entry["compaction"].(map[string]any)["messages_summarized"], "what the model saw before")

	t.Run("history starts at the clear", func(t *testing.T) {
		assert.Equal(t, []string{"compaction"}, ts.roles(t, id, k1))
		unread, _ := unreadAs(t, ts, id, k1)
		assert.Equal(t, float64(0), unread)
	})
	t.Run("the log keeps everything", func(t *testing.T) {
		page, _ := ts.getEventPage(t, id, "?after=0&limit=1000", k1...)
		var log strings.Builder
		for _, ev := range page.Data {
			log.Write(ev)
		}
		assert.Contains(t, log.String(), `"delta":"one"`)
		assert.Contains(t, log.String(), `"name":"kerneld.session.cleared"`)
	})
	t.Run("the feed says cleared", func(t *testing.T) {
		var kinds []string
		for _, f := range nextFeedFrames(t, feed, 3) {
			kinds = append(kinds, f.event)
			assert.Equal(t, id, f.session)
		}
		assert.Equal(t, []string{"session.status", "session.cleared", "run.ended"}, kinds)
	})
	t.Run("the model sees only what follows, memory kept", func(t *testing.T) {
		ranOnce(t, ts, id, "three", k1)
		assert.Equal(t, []string{"three"}, models.lastUserInputs(t))
		assert.Contains(t, models.lastSystem(), `city: "Lyon"`)
		assert.Equal(t, []string{"compaction", "user", "assistant"}, ts.roles(t, id, k1))
	})
	t.Run("fork and regenerate keep nothing before it", func(t *testing.T) {
		fork := ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/fork", "", k1...)["id"].(string)
		assert.Equal(t, []string{"compaction", "user", "assistant"}, ts.roles(t, fork, k1))
		ranOnce(t, ts, fork, "four", k1)
		assert.Equal(t, []string{"three", "four"}, models.lastUserInputs(t))

		runs := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "", k1...)["data"].([]any)
		three := runs[0].(map[string]any)["id"].(string) // newest first
		regen := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/runs/"+three+"/regenerate", "", k1...)
		again := regen["session"].(map[string]any)["id"].(string)
		waitRunAs(t, ts, again, regen["run"].(map[string]any)["id"].(string), k1)
		assert.Equal(t, []string{"three"}, models.lastUserInputs(t))
		assert.Equal(t, []string{"compaction", "user", "assistant"}, ts.roles(t, again, k1))
	})
	t.Run("memory goes when asked", func(t *testing.T) {
		ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/clear", `{"memory":true}`, k1...)
		assert.Empty(t, ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/memory", "", k1...)["data"])
		ranOnce(t, ts, id, "five", k1)
		assert.Equal(t, []string{"five"}, models.lastUserInputs(t))
		assert.NotContains(t, models.lastSystem(), "Lyon")
	})
	t.Run("refused", func(t *testing.T) {
		wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/clear", "", k2...), http.StatusNotFound, "session_not_found")
		wantProblem(t, ts.do(t, "POST", "/sessions/nope/clear", "", k1...), http.StatusNotFound, "session_not_found")
		wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/clear", `{"memory":"yes"}`, k1...), http.StatusBadRequest, "invalid_request")
		wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/clear", `{"history":true}`, k1...), http.StatusBadRequest, "invalid_request")
	})
	t.Run("busy", func(t *testing.T) {
		busy := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"waiter"}`, k1...)["id"].(string)
		first := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+busy+"/run", `{"input":"wait"}`, k1...)["id"].(string)
		<-ts.kernel.Wait.Started()
		p := wantProblem(t, ts.do(t, "POST", "/sessions/"+busy+"/clear", "", k1...), http.StatusConflict, "session_busy")
		assert.Equal(t, first, p["active_run_id"])
		queued := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+busy+"/run", `{"input":"later","if_busy":"queue"}`, k1...)["id"].(string)
		wantProblem(t, ts.do(t, "POST", "/sessions/"+busy+"/clear", "", k1...), http.StatusConflict, "session_busy")
		ts.kernel.Wait.Release() // for every call: the queued run's too
		waitRunAs(t, ts, busy, queued, k1)
		ts.must(t, http.StatusOK, "POST", "/sessions/"+busy+"/clear", "", k1...)
		assert.Equal(t, []string{"compaction"}, ts.roles(t, busy, k1))
	})
}
