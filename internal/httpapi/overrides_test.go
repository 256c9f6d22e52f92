package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// picky may run on two models, with a chosen reasoning effort.
const picky = `
name: picky
model: {provider: scripted, name: small, script: [{text: "{input}"}]}
overrides: {models: [large], reasoning_effort: true}
`

func TestSessions_Overrides(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: []string{picky}}})

	t.Run("the agent says what may be chosen", func(t *testing.T) {
		a := ts.must(t, http.StatusOK, "GET", "/agents/picky", "")
		assert.Equal(t, map[string]any{"models": []any{"small", "large"}, "reasoning_effort": true, "temperature": false, "max_tokens": false},
			a["overrides"])
	})
	t.Run("a model the agent does not list is 422", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions", `{"agent":"picky","overrides":{"model":"huge"}}`)
		require.Equal(t, http.StatusUnprocessableEntity, res.status, "%s", res.body)
		p := res.json(t)
		assert.Equal(t, "override_not_allowed", p["code"])
		assert.Equal(t, "overrides.model", p["field"])
		assert.Equal(t, "huge", p["value"])
	})
	t.Run("a setting the agent does not list is 422", func(t *testing.T) {
		id := ts.createSession(t, "picky")
		res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hi","overrides":{"temperature":0.3}}`)
		require.Equal(t, http.StatusUnprocessableEntity, res.status, "%s", res.body)
		assert.Equal(t, "overrides.temperature", res.json(t)["field"])
		res = ts.do(t, "PATCH", "/sessions/"+id, `{"overrides":{"max_tokens":10}}`)
		require.Equal(t, http.StatusUnprocessableEntity, res.status, "%s", res.body)
	})
	t.Run("a malformed value is 400", func(t *testing.T) {
		res := ts.do(t, "POST", "/sessions", `{"agent":"picky","overrides":{"reasoning_effort":"extreme"}}`)
		require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
		res = ts.do(t, "POST", "/sessions", `{"agent":"picky","overrides":{"provider":"other"}}`)
		require.Equal(t, http.StatusBadRequest, res.status, "%s", res.body)
	})
	t.Run("session and run overrides pick the run's model", func(t *testing.T) {
		s := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"picky","overrides":{"model":"large"}}`)
		id := s["id"].(string)
		assert.Equal(t, map[string]any{"model": "large"}, s["overrides"])
		run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"hi","overrides":{"reasoning_effort":"low"}}`)
		run = ts.waitRun(t, id, run["id"].(string))
		assert.Equal(t, "large", run["model"])
		assert.Equal(t, map[string]any{"reasoning_effort": "low"}, run["overrides"])
		assert.Equal(t, "input", run["kind"])

		s = ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"overrides":{}}`)
		assert.Equal(t, map[string]any{}, s["overrides"])
		run = ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"again"}`)
		run = ts.waitRun(t, id, run["id"].(string))
		assert.Equal(t, "small", run["model"])
	})
}
