package main

import (
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

// TestCluster_WebhooksAcrossTakeOver runs a session with a receiver on
// replica A of two. A announces the approval its run waits for while the
// receiver is down, tries once, and is killed with SIGKILL; the receiver
// comes back. B takes the session over, delivers what A could not, and,
// once the approval is decided there, announces the decision and the
// run's end: each delivery reaches the receiver, signed, exactly once.
func TestCluster_WebhooksAcrossTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	eachSharedStore(t, func(t *testing.T, store sharedStore) {
		secret := webhook.NewSecret()
		rcv := newHookReceiver(t, secret)
		rcv.setDown(true)
		c := newCluster(t, store)
		c.env = []string{"KERNELD_WEBHOOK_SECRET=" + secret}
		a, b := c.start("a"), c.start("b")

		hooks := `"webhooks":[{"url":"` + rcv.URL + `","events":["*"]}]`
		id := post(t, a.base+"/sessions", `{"agent":"asking",`+hooks+`}`)["id"].(string)
		runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"what time is it?"}`)["id"].(string)
		waitRun(t, a.base, id, runID, "waiting_input")
		waitDelivery(t, a.base, func(d map[string]any) bool {
			return d["type"] == webhook.ApprovalRequested && d["state"] == "pending" && d["attempts"].(float64) >= 1
		})
		a.kill9(t)
		rcv.setDown(false)

		asked := rcv.wait(t, webhook.ApprovalRequested)["data"].(map[string]any)
		if asked["run_id"] != runID || asked["session_id"] != id {
			t.Fatalf("approval.requested data = %v", asked)
		}
		post(t, b.base+"/sessions/"+id+"/runs/"+runID+"/approvals/"+asked["tool_call_id"].(string), `{"decision":"approve"}`)
		waitRun(t, b.base, id, runID, "succeeded")
		if got := rcv.wait(t, webhook.RunFinished)["data"].(map[string]any); got["run_id"] != runID || got["state"] != "succeeded" {
			t.Errorf("run.finished data = %v", got)
		}
		if got := rcv.wait(t, webhook.ApprovalDecided)["data"].(map[string]any); got["decision"] != "approved" {
			t.Errorf("approval.decided data = %v", got)
		}
		waitDeliveries(t, b.base, 3, "delivered")

		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if len(rcv.ids) != 3 || rcv.forged != 0 {
			t.Errorf("deliveries = %v (%d forged), want the 3 above", rcv.ids, rcv.forged)
		}
		for id, n := range rcv.ids {
			if n != 1 {
				t.Errorf("delivery %s came %d times, want once", id, n)
			}
		}
	})
}

// waitDeliveries waits until kerneld at base lists n webhook deliveries,
// all in state.
func waitDeliveries(t *testing.T, base string, n int, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, page := getJSONMap(t, base+"/webhooks/deliveries")
		data, _ := page["data"].([]any)
		all := len(data) == n
		for _, d := range data {
			all = all && d.(map[string]any)["state"] == state
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries = %v after 20s, want %d %s", data, n, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
