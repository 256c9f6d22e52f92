package httpapi_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
)

func TestSessionClientIDCreateIsIdempotent(t *testing.T) {
	ts := newServer(t, serverOptions{})
	res := ts.do(t, "POST", "/sessions", `{"agent":"echo","id":"chat:42"}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	first := res.json(t)
	assert.Equal(t, "chat:42", first["id"])
	assert.Equal(t, "chat:42", first["root_id"])
	assert.Equal(t, "/sessions/chat:42", res.header.Get("Location"))

	again := ts.must(t, http.StatusOK, "POST", "/sessions", `{"agent":"echo","id":"chat:42","name":"ignored"}`)
	assert.Equal(t, first["created_at"], again["created_at"], "a retry answers the same session")

	res = ts.do(t, "POST", "/sessions", `{"agent":"tooluser","id":"chat:42"}`)
	assert.Equal(t, http.StatusConflict, res.status)
	assert.Equal(t, "session_exists", res.json(t)["code"])

	// The id works everywhere a session id does, and comes back as is.
	runID := ts.startRun(t, "chat:42", "hello")
	run := ts.waitRun(t, "chat:42", runID)
	assert.Equal(t, "chat:42", run["session_id"])
	page := ts.must(t, http.StatusOK, "GET", "/sessions/chat:42/events", "", "Accept", "application/json")
	events := page["data"].([]any)
	require.NotEmpty(t, events)
	started := events[0].(map[string]any)
	assert.Equal(t, "chat:42", started["threadId"])
	assert.Equal(t, "chat:42", started["metadata"].(map[string]any)["kerneld"].(map[string]any)["sessionId"])
	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/chat:42/messages", "")["data"].([]any)
	assert.Len(t, msgs, 2)
	list := ts.must(t, http.StatusOK, "GET", "/sessions", "")["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, "chat:42", list[0].(map[string]any)["id"])
	ts.must(t, http.StatusNoContent, "DELETE", "/sessions/chat:42", "")
	ts.must(t, http.StatusNotFound, "GET", "/sessions/chat:42", "")
}

func TestSessionClientIDShape(t *testing.T) {
	ts := newServer(t, serverOptions{})
	for _, id := range []string{`""`, `"a b"`, `"a/b"`, `"x~y"`, `"` + strings.Repeat("a", 129) + `"`, `7`} {
		res := ts.do(t, "POST", "/sessions", `{"agent":"echo","id":`+id+`}`)
		assert.Equal(t, http.StatusBadRequest, res.status, "id %s: %s", id, res.body)
	}
	// A UUID, as AG-UI clients name threads, is a fine id.
	uuid := "2b0f4c1e-8a3d-4f5e-9b6c-7d8e9f0a1b2c"
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","id":"`+uuid+`"}`)
	ts.must(t, http.StatusOK, "GET", "/sessions/"+uuid, "")
	// An id kerneld issued, given back, names that session.
	issued := ts.createSession(t, "echo")
	got := ts.must(t, http.StatusOK, "POST", "/sessions", `{"agent":"echo","id":"`+issued+`"}`)
	assert.Equal(t, issued, got["id"])
}

func TestSessionClientIDsAreTenantScoped(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
	acme, other := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","id":"shared"}`, acme...)
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"tooluser","id":"shared"}`, other...)
	assert.Equal(t, "echo", ts.must(t, http.StatusOK, "GET", "/sessions/shared", "", acme...)["agent"])
	assert.Equal(t, "tooluser", ts.must(t, http.StatusOK, "GET", "/sessions/shared", "", other...)["agent"])
	ts.must(t, http.StatusNoContent, "DELETE", "/sessions/shared", "", other...)
	ts.must(t, http.StatusNotFound, "GET", "/sessions/shared", "", other...)
	ts.must(t, http.StatusOK, "GET", "/sessions/shared", "", acme...)

	// A tenant's generated id is no one else's to take or see.
	issued := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acme...)["id"].(string)
	mine := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"tooluser","id":"`+issued+`"}`, other...)
	assert.Equal(t, issued, mine["id"])
	assert.Equal(t, "echo", ts.must(t, http.StatusOK, "GET", "/sessions/"+issued, "", acme...)["agent"])
	assert.Equal(t, "tooluser", ts.must(t, http.StatusOK, "GET", "/sessions/"+issued, "", other...)["agent"])
}

func TestSessionCreateIdempotencyKey(t *testing.T) {
	ts := newServer(t, serverOptions{})
	key := []string{"Idempotency-Key", "create-1"}
	first := ts.do(t, "POST", "/sessions", `{"agent":"echo"}`, key...)
	require.Equal(t, http.StatusCreated, first.status, string(first.body))
	again := ts.do(t, "POST", "/sessions", `{"agent":"echo"}`, key...)
	require.Equal(t, http.StatusOK, again.status, string(again.body))
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.json(t)["id"], again.json(t)["id"])
	other := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, "Idempotency-Key", "create-2")
	assert.NotEqual(t, first.json(t)["id"], other["id"])
	res := ts.do(t, "POST", "/sessions", `{"agent":"tooluser"}`, key...)
	assert.Equal(t, http.StatusConflict, res.status)
	// With an id, the id is what makes a creation safe to retry.
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","id":"keyed"}`, key...)
	ts.must(t, http.StatusOK, "POST", "/sessions", `{"agent":"echo","id":"keyed"}`, key...)
}

// TestSessionCreateIdempotencyKeyOtherBody: the same Idempotency-Key with
// another body is refused 422, as on runs, instead of answering with the
// first session; the same body, however spaced, is still a retry.
func TestSessionCreateIdempotencyKeyOtherBody(t *testing.T) {
	ts := newServer(t, serverOptions{})
	key := []string{"Idempotency-Key", "create-body"}
	first := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","name":"a","metadata":{"k":"v"}}`, key...)
	again := ts.must(t, http.StatusOK, "POST", "/sessions", `{ "metadata": {"k": "v"}, "agent": "echo", "name": "a" }`, key...)
	assert.Equal(t, first["id"], again["id"])
	for _, body := range []string{`{"agent":"echo","name":"b","metadata":{"k":"v"}}`, `{"agent":"echo","name":"a"}`,
		`{"agent":"echo","name":"a","metadata":{"k":"v"},"memory":{"m":1}}`} {
		res := ts.do(t, "POST", "/sessions", body, key...)
		require.Equal(t, http.StatusUnprocessableEntity, res.status, body)
		problem := res.json(t)
		assert.Equal(t, "idempotency_key_reused", problem["code"], body)
		assert.Equal(t, first["id"], problem["session_id"], body)
	}
}

func TestSessionClientIDConcurrentCreates(t *testing.T) {
	ts := newServer(t, serverOptions{})
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = ts.do(t, "POST", "/sessions", `{"agent":"echo","id":"race"}`).status
		})
	}
	wg.Wait()
	created := 0
	for _, st := range statuses {
		assert.Contains(t, []int{http.StatusCreated, http.StatusOK}, st)
		if st == http.StatusCreated {
			created++
		}
	}
	assert.Equal(t, 1, created)
	assert.Len(t, ts.must(t, http.StatusOK, "GET", "/sessions", "")["data"], 1)
}

func TestOneCallRun(t *testing.T) {
	ts := newServer(t, serverOptions{})
	res := ts.do(t, "POST", "/run", `{"agent":"echo","input":"one","session_id":"thread-1"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	run := res.json(t)
	assert.Equal(t, "thread-1", run["session_id"])
	assert.Equal(t, "/sessions/thread-1/runs/"+run["id"].(string), res.header.Get("Location"))
	ts.waitRun(t, "thread-1", run["id"].(string))

	// The second call reuses the session, and streams inline when asked.
	st := ts.openStream(t, "POST", "/run", `{"agent":"echo","input":"two","session_id":"thread-1"}`, "Accept", "text/event-stream")
	frames := st.events(t, runEnded)
	st.close()
	assert.Equal(t, "RUN_STARTED", frames[0].event)
	assert.Contains(t, frames[0].data, `"threadId":"thread-1"`)
	assert.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event)
	assert.Len(t, ts.must(t, http.StatusOK, "GET", "/sessions", "")["data"], 1)
	assert.Len(t, ts.must(t, http.StatusOK, "GET", "/sessions/thread-1/messages", "")["data"], 4)

	res = ts.do(t, "POST", "/run", `{"agent":"tooluser","input":"x","session_id":"thread-1"}`)
	assert.Equal(t, http.StatusConflict, res.status)
	assert.Equal(t, "session_exists", res.json(t)["code"])

	// Without session_id, an Idempotency-Key makes a retry find its run.
	key := []string{"Idempotency-Key", "one-call"}
	a := ts.must(t, http.StatusAccepted, "POST", "/run", `{"agent":"echo","input":"hi"}`, key...)
	b := ts.do(t, "POST", "/run", `{"agent":"echo","input":"hi"}`, key...)
	assert.Equal(t, "true", b.header.Get("Idempotent-Replayed"))
	assert.Equal(t, a["id"], b.json(t)["id"])
	assert.Equal(t, a["session_id"], b.json(t)["session_id"])
}

func TestOneCallRunInvalid(t *testing.T) {
	ts := newServer(t, serverOptions{})
	for body, field := range map[string]string{
		`{"input":"x","session_id":"s"}`:                                  "agent",
		`{"agent":"echo","session_id":"s"}`:                               "input",
		`{"agent":"echo","input":"x","session_id":"a b"}`:                 "session_id",
		`{"agent":"echo","input":"x","session_id":"s","x":1}`:             "x",
		`{"agent":"echo","input":"x","session_id":"s","if_busy":"maybe"}`: "if_busy",
	} {
		res := ts.do(t, "POST", "/run", body)
		assert.Equal(t, http.StatusBadRequest, res.status, "%s: %s", body, res.body)
		assert.Contains(t, string(res.body), field, body)
	}
	res := ts.do(t, "POST", "/run", `{"agent":"nope","input":"x","session_id":"s2"}`)
	assert.Equal(t, http.StatusNotFound, res.status)
}
