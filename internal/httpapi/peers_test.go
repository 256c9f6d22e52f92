package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// host and guest may take turns on each other's sessions; loner names
// no peers.
const (
	hostAgent  = "name: host\nmodel: {provider: scripted, name: small, script: [{text: \"Host: {input}\"}]}\npeers: [guest]\n"
	guestAgent = "name: guest\nmodel: {provider: scripted, name: small, script: [{text: \"Guest: {input}\"}]}\npeers: [host]\n"
	lonerAgent = "name: loner\nmodel: {provider: scripted, name: small, script: [{text: \"{input}\"}]}\n"
)

func TestSessions_AgentsTakeTurns(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Agents: []string{hostAgent, guestAgent, lonerAgent}}})

	res := ts.do(t, "POST", "/sessions", `{"agent":"host","agents":["loner"]}`)
	wantProblem(t, res, http.StatusUnprocessableEntity, "agent_not_allowed")
	id := ts.createSession(t, "host")
	res = ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hi","agent":"guest"}`)
	wantProblem(t, res, http.StatusUnprocessableEntity, "agent_not_allowed")

	s := ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"agents":["guest"]}`)
	assert.Equal(t, []any{"guest"}, s["agents"])
	run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"one"}`)
	ts.waitRun(t, id, run["id"].(string))
	run = ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"two","agent":"guest"}`)
	run = ts.waitRun(t, id, run["id"].(string))
	assert.Equal(t, "guest", run["agent"])

	msgs := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages", "")["data"].([]any)
	require.Len(t, msgs, 4)
	var said []string
	for _, m := range msgs {
		m := m.(map[string]any)
		if m["role"] == "assistant" {
			said = append(said, m["agent"].(string)+": "+m["content"].(string))
		}
	}
	assert.Equal(t, []string{"host: Host: one", "guest: Guest: two"}, said)
}
