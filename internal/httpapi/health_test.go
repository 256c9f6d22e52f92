package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// pacer streams three words, pausing between them far longer than the
// stall time of TestHealth_Stall.
const pacer = `
name: pacer
description: answers slowly
model: {provider: scripted, token_delay: 300ms, script: [{text: "one two three"}]}
`

// TestHealth_Stall runs a paced model under a short stall time: the
// run's status, and its session's in a listing, turn stalled while it is
// quiet, its stream gets one CUSTOM kerneld.run.stalled however many
// pauses it makes, and both are idle once it ends. A quick run never
// stalls.
func TestHealth_Stall(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{
		Agents: append([]string{pacer}, kerneltest.DefaultAgents...), StallAfter: 50 * time.Millisecond,
	}})
	id := ts.createSession(t, "pacer")
	runID := ts.startRun(t, id, "hi")
	var sawRun, sawSession bool
	pollUntil(t, "the run and its session are stalled", func() bool {
		sawRun = sawRun || ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "")["status"] == "stalled"
		list := ts.must(t, http.StatusOK, "GET", "/sessions?state=running", "")["data"].([]any)
		sawSession = sawSession || (len(list) == 1 && list[0].(map[string]any)["status"] == "stalled")
		return sawRun && sawSession
	})
	if run := ts.waitRun(t, id, runID); run["status"] != "idle" {
		t.Errorf("status of the ended run = %v, want idle", run["status"])
	}
	if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, ""); s["status"] != "idle" {
		t.Errorf("status of the session = %v, want idle", s["status"])
	}
	if n := stallNotices(t, ts, id); n != 1 {
		t.Errorf("%d stall notices, want 1", n)
	}

	quick := ts.createSession(t, "echo")
	ts.waitRun(t, quick, ts.startRun(t, quick, "hi"))
	if n := stallNotices(t, ts, quick); n != 0 {
		t.Errorf("%d stall notices in a quick run, want 0", n)
	}
}

// stallNotices counts the CUSTOM kerneld.run.stalled events of a
// session's log.
func stallNotices(t *testing.T, ts *testServer, id string) int {
	t.Helper()
	page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/events", "", "Accept", "application/json")
	n := 0
	for _, raw := range page["data"].([]any) {
		if ev := raw.(map[string]any); ev["type"] == "CUSTOM" && ev["name"] == "kerneld.run.stalled" {
			n++
		}
	}
	return n
}
