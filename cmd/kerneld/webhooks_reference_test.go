package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/webhooktest"
)

// referenceInbox keeps what the Standard Webhooks reference receiver
// verified, so a test can wait for deliveries in whatever order they come.
type referenceInbox struct {
	ref *webhooktest.Reference
	got []webhooktest.Verified
}

// wait returns the data of the delivery of type typ for run runID (or,
// with runID "", for session sessionID), reading the receiver until it
// comes. Every delivery must pass the reference verifier.
func (in *referenceInbox) wait(t *testing.T, typ, sessionID, runID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, v := range in.got {
			data, _ := v.Payload["data"].(map[string]any)
			if v.Type == typ && v.Payload["type"] == typ && data["session_id"] == sessionID && (runID == "" || data["run_id"] == runID) {
				return data
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("no verified %s for session %s run %q within 20s; got %v", typ, sessionID, runID, in.got)
		}
		in.got = append(in.got, in.ref.NextVerified(t, left))
	}
}

// referenceAgents writes the agents the reference test runs: gated (from
// configs/agents) and broken, whose model always fails.
func referenceAgents(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gated, err := os.ReadFile(filepath.Join("..", "..", "configs", "agents", "gated.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "gated.yaml", string(gated))
	writeFile(t, dir, "broken.yaml", "name: broken\nmodel: {provider: scripted, error: the model is down, script: [{text: never}]}\n")
	return dir
}

// TestRun_WebhooksVerifiedByReference drives a real kerneld through every
// event a webhook announces (a run that succeeds, fails, is cancelled
// while it runs and while it waits in the queue; an approval asked for and
// decided; a session closed; a quota exceeded) with a session's receiver
// that verifies each delivery with the Standard Webhooks reference
// library, as a user's receiver would: each arrives, signed, with its data.
func TestRun_WebhooksVerifiedByReference(t *testing.T) {
	secret := webhook.NewSecret()
	in := &referenceInbox{ref: webhooktest.StartReference(t, secret)}
	d := startInProcessWith(t, env(map[string]string{"KERNELD_WEBHOOK_SECRET": secret, "KERNELD_MAX_CONCURRENT_RUNS": "2"}),
		referenceAgents(t))
	hooks := `"webhooks":[{"url":"` + in.ref.URL + `","events":["*"]}]`
	newSession := func(agent string) string {
		return post(t, d.base+"/sessions", `{"agent":"`+agent+`",`+hooks+`}`)["id"].(string)
	}

	// Approval asked for, decided, and the run finished.
	id := newSession("gated")
	runID := post(t, d.base+"/sessions/"+id+"/run", `{"input":"buy milk"}`)["id"].(string)
	asked := in.wait(t, webhook.ApprovalRequested, id, runID)
	if asked["tool_name"] != "memory_set" || asked["agent"] != "gated" {
		t.Errorf("approval.requested data = %v", asked)
	}
	post(t, d.base+"/sessions/"+id+"/runs/"+runID+"/approvals/"+asked["tool_call_id"].(string), `{"decision":"approve"}`)
	if got := in.wait(t, webhook.ApprovalDecided, id, runID); got["decision"] != "approved" || got["tool_call_id"] != asked["tool_call_id"] {
		t.Errorf("approval.decided data = %v", got)
	}
	if got := in.wait(t, webhook.RunFinished, id, runID); got["state"] != "succeeded" {
		t.Errorf("run.finished data = %v", got)
	}

	// A run cancelled while it waits for a person, and one cancelled while
	// it waits in the queue behind it, before it ever started.
	waiting := post(t, d.base+"/sessions/"+id+"/run", `{"input":"buy eggs"}`)["id"].(string)
	in.wait(t, webhook.ApprovalRequested, id, waiting)
	queued := post(t, d.base+"/sessions/"+id+"/run", `{"input":"buy bread","if_busy":"queue"}`)
	if queued["state"] != "queued" {
		t.Fatalf("queued run = %v", queued)
	}
	queuedID := queued["id"].(string)
	post(t, d.base+"/sessions/"+id+"/runs/"+queuedID+"/cancel", `{}`)
	if got := in.wait(t, webhook.RunCancelled, id, queuedID); got["state"] != "cancelled" {
		t.Errorf("run.cancelled data of the queued run = %v", got)
	}
	post(t, d.base+"/sessions/"+id+"/runs/"+waiting+"/cancel", `{}`)
	if got := in.wait(t, webhook.RunCancelled, id, waiting); got["state"] != "cancelled" {
		t.Errorf("run.cancelled data = %v", got)
	}
	if got := in.wait(t, webhook.ApprovalDecided, id, waiting); got["decision"] != "denied" {
		t.Errorf("approval.decided data of the cancelled run = %v", got)
	}

	// A run that fails.
	broken := newSession("broken")
	failedID := post(t, d.base+"/sessions/"+broken+"/run", `{"input":"hi"}`)["id"].(string)
	got := in.wait(t, webhook.RunFailed, broken, failedID)
	if e, _ := got["error"].(map[string]any); got["state"] != "failed" || e["code"] != "model_error" || e["message"] == "" {
		t.Errorf("run.failed data = %v", got)
	}

	// A quota exceeded: two runs wait for a person, the tenant's limit.
	// (A run gives its slot back a moment after its end is announced.)
	first, second := newSession("gated"), newSession("gated")
	for _, s := range []string{first, second} {
		in.wait(t, webhook.ApprovalRequested, s, postAdmitted(t, d.base+"/sessions/"+s+"/run", `{"input":"hold"}`)["id"].(string))
	}
	third := newSession("gated")
	if status, body := request(t, http.MethodPost, d.base+"/sessions/"+third+"/run", `{"input":"one too many"}`); status != http.StatusTooManyRequests {
		t.Fatalf("a third concurrent run = %d %s, want 429", status, body)
	}
	if got := in.wait(t, webhook.QuotaExceeded, third, ""); got["quota"] != "max_concurrent_runs" {
		t.Errorf("quota.exceeded data = %v", got)
	}

	// A session closed.
	post(t, d.base+"/sessions/"+broken+"/close", `{"reason":"done"}`)
	if got := in.wait(t, webhook.SessionClosed, broken, ""); got["reason"] != "done" {
		t.Errorf("session.closed data = %v", got)
	}
}

// postAdmitted posts body to url until kerneld admits it: a 429 (a quota's
// slot not given back yet) is tried again, for up to 20s.
func postAdmitted(t *testing.T, url, body string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, got := request(t, http.MethodPost, url, body)
		if status < 300 {
			return got
		}
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("POST %s = %d %v", url, status, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
