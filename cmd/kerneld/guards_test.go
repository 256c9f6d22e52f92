package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

// policyService is a guard that checks every request's signature and
// decides by the input the tool call carries (the memory_set value) or,
// before a run, by the run's input.
func policyService(t *testing.T, secret string) *httptest.Server {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := key.Verify(r.Header, body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var req struct {
			Input    string `json:"input"`
			ToolCall struct {
				Arguments struct{ Value string } `json:"arguments"`
			} `json:"tool_call"`
		}
		_ = json.Unmarshal(body, &req)
		what := req.ToolCall.Arguments.Value + req.Input
		answers := map[string]string{
			"allow":    `{"decision":"allow"}`,
			"deny":     `{"decision":"deny","reason":"notes are read-only today"}`,
			"ask":      `{"decision":"ask","reason":"a person should look"}`,
			"rewrite":  `{"decision":"rewrite","arguments":{"key":"note","value":"rewritten"},"reason":"normalised"}`,
			"refuse":   `{"decision":"deny","reason":"no such requests"}`,
			"annotate": `{"decision":"annotate","annotation":"the user is on the free plan"}`,
		}
		answer, ok := answers[what]
		if !ok { // "slow": later than the guard's timeout
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// guardedAgents writes three agents guarded by url: failing closed,
// failing open, and asked before each run too.
func guardedAgents(t *testing.T, url, secret string) string {
	t.Helper()
	dir := t.TempDir()
	script := `model: {provider: scripted, script: [{text: "Saving.", tool_calls: [{name: memory_set, arguments: {key: note, value: "{input}"}}]}, {text: "Done."}]}
tools: [memory_set]
`
	guard := func(extra string) string {
		return "guard: {url: '" + url + "', secret: '" + secret + "', timeout: 300ms" + extra + "}\n"
	}
	writeFile(t, dir, "closed.yaml", "name: closed\n"+script+guard(""))
	writeFile(t, dir, "open.yaml", "name: open\n"+script+guard(", on_failure: allow"))
	writeFile(t, dir, "before.yaml", "name: before\nmodel: {provider: scripted, script: [{text: \"{input}\"}]}\n"+guard(", before_run: true"))
	return dir
}

// TestRun_Guards runs guarded tool calls and runs through every decision
// a guard can give, and a guard that does not answer in time: each
// decision is applied and logged in the run's log.
func TestRun_Guards(t *testing.T) {
	secret := webhook.NewSecret()
	guardSrv := policyService(t, secret)
	d := startInProcessWith(t, env(nil), guardedAgents(t, guardSrv.URL, secret))

	for _, tc := range []struct {
		agent, input string
		decision     string // as the log records it
		note         string // memory "note" after the run; "" when never set
		result       string // what the tool call's result contains
	}{
		{"closed", "allow", "allow", "allow", "ok"},
		{"closed", "deny", "deny", "", "denied by the guard: notes are read-only today"},
		{"closed", "rewrite", "rewrite", "rewritten", "ok"},
		{"closed", "slow", "deny", "", "denied by the guard: the guard did not answer"},
		{"open", "slow", "allow", "slow", "ok"},
	} {
		t.Run(tc.agent+" "+tc.input, func(t *testing.T) {
			id, runID := startRun(t, d.base, tc.agent, tc.input)
			waitRun(t, d.base, id, runID, "succeeded")
			evs := sessionEvents(t, d.base, id)
			g := customEvent(t, evs, "kerneld.guard.decided")
			if g["decision"] != tc.decision || g["toolName"] != "memory_set" {
				t.Errorf("guard decision logged = %v, want %s", g, tc.decision)
			}
			if tc.input == "slow" && g["failed"] != true {
				t.Errorf("a guard that timed out is logged as %v, want failed", g)
			}
			if res := toolResult(t, evs); !strings.Contains(res, tc.result) {
				t.Errorf("tool result = %q, want it to contain %q", res, tc.result)
			}
			if note := memoryNote(t, d.base, id); note != tc.note {
				t.Errorf("note = %q, want %q", note, tc.note)
			}
		})
	}

	t.Run("ask", func(t *testing.T) {
		id, runID := startRun(t, d.base, "closed", "ask")
		waitRun(t, d.base, id, runID, "waiting_input")
		evs := sessionEvents(t, d.base, id)
		asked := customEvent(t, evs, "kerneld.approval.requested")
		post(t, d.base+"/sessions/"+id+"/runs/"+runID+"/approvals/"+asked["toolCallId"].(string), `{"decision":"approve"}`)
		waitRun(t, d.base, id, runID, "succeeded")
		if g := customEvent(t, evs, "kerneld.guard.decided"); g["decision"] != "ask" {
			t.Errorf("guard decision logged = %v, want ask", g)
		}
		if note := memoryNote(t, d.base, id); note != "ask" {
			t.Errorf("note = %q after approval, want ask", note)
		}
	})

	t.Run("before run refuses", func(t *testing.T) {
		id, runID := startRun(t, d.base, "before", "refuse")
		run := waitRun(t, d.base, id, runID, "failed")
		if e, _ := run["error"].(map[string]any); e["code"] != "guard_denied" || !strings.Contains(e["message"].(string), "no such requests") {
			t.Errorf("run error = %v, want guard_denied with the guard's reason", run["error"])
		}
		if g := customEvent(t, sessionEvents(t, d.base, id), "kerneld.guard.decided"); g["stage"] != "before_run" || g["decision"] != "deny" {
			t.Errorf("guard decision logged = %v", g)
		}
	})

	t.Run("before run annotates", func(t *testing.T) {
		id, runID := startRun(t, d.base, "before", "annotate")
		waitRun(t, d.base, id, runID, "succeeded")
		g := customEvent(t, sessionEvents(t, d.base, id), "kerneld.guard.decided")
		if g["decision"] != "annotate" || g["annotation"] != "the user is on the free plan" {
			t.Errorf("guard decision logged = %v", g)
		}
	})
}

// startRun creates a session of agent and posts input to it.
func startRun(t *testing.T, base, agent, input string) (sessionID, runID string) {
	t.Helper()
	id := post(t, base+"/sessions", `{"agent":"`+agent+`"}`)["id"].(string)
	return id, post(t, base+"/sessions/"+id+"/run", `{"input":"`+input+`"}`)["id"].(string)
}

// getJSONMap GETs url and decodes its JSON body.
func getJSONMap(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// waitRun waits until the run is in state, and returns it.
func waitRun(t *testing.T, base, id, runID, state string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, run := getJSONMap(t, base+"/sessions/"+id+"/runs/"+runID)
		if run["state"] == state {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v after 20s, want %s", runID, run["state"], state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionEvents returns the session's log.
func sessionEvents(t *testing.T, base, id string) []map[string]any {
	t.Helper()
	_, page := getJSONMap(t, base+"/sessions/"+id+"/events")
	data, _ := page["data"].([]any)
	out := make([]map[string]any, len(data))
	for i, e := range data {
		out[i], _ = e.(map[string]any)
	}
	return out
}

// customEvent returns the value of the first CUSTOM event named name.
func customEvent(t *testing.T, evs []map[string]any, name string) map[string]any {
	t.Helper()
	for _, e := range evs {
		if e["type"] == "CUSTOM" && e["name"] == name {
			v, _ := e["value"].(map[string]any)
			return v
		}
	}
	t.Fatalf("no %s event in %v", name, evs)
	return nil
}

// toolResult returns the content of the first tool call result.
func toolResult(t *testing.T, evs []map[string]any) string {
	t.Helper()
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" {
			s, _ := e["content"].(string)
			return s
		}
	}
	t.Fatalf("no TOOL_CALL_RESULT in %v", evs)
	return ""
}

// memoryNote returns the session's memory entry "note", "" if unset.
func memoryNote(t *testing.T, base, id string) string {
	t.Helper()
	status, m := getJSONMap(t, base+"/sessions/"+id+"/memory/note")
	if status == http.StatusNotFound {
		return ""
	}
	s, _ := m["value"].(string)
	return s
}
