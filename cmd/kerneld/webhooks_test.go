package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

func TestWebhooksConfig(t *testing.T) {
	secret, acme := webhook.NewSecret(), webhook.NewSecret()
	file := writeFile(t, t.TempDir(), "kerneld.yaml", `
webhooks:
  secret: ${KERNELD_WEBHOOK_SECRET}
  endpoints:
    - {url: "https://ops.example.com/kerneld", events: ["*"], agent: helper}
  tenants:
    acme:
      secret: "${ACME_SECRET}"
      endpoints: [{url: "http://127.0.0.1:9000/hook", events: [run.finished, approval.requested]}]
  retry_for: 1h
  allow_networks: [169.254.10.0/24]
`)
	cfg, err := loadConfig(flagValues{config: file}, env(map[string]string{"KERNELD_WEBHOOK_SECRET": secret, "ACME_SECRET": acme}))
	if err != nil {
		t.Fatal(err)
	}
	targets, err := cfg.Webhooks.targets()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := targets.Deliveries(webhook.Announcement{Type: webhook.RunFinished, Key: "k", Tenant: "acme", Agent: "helper", SessionID: "s"})
	if err != nil || len(ds) != 2 {
		t.Fatalf("acme's helper run finished goes to %d receivers (%v), want 2", len(ds), err)
	}
	if cfg.Webhooks.RetryFor.Hours() != 1 || cfg.Webhooks.Timeout != webhook.DefaultTimeout {
		t.Errorf("retry_for, timeout = %v, %v", cfg.Webhooks.RetryFor, cfg.Webhooks.Timeout)
	}

	for name, body := range map[string]string{
		"bad secret":      "webhooks: {secret: hunter2}",
		"link-local":      "webhooks: {secret: " + secret + ", endpoints: [{url: 'https://169.254.169.254/', events: ['*']}]}",
		"plain http":      "webhooks: {secret: " + secret + ", endpoints: [{url: 'http://hooks.example.com/', events: ['*']}]}",
		"unknown event":   "webhooks: {secret: " + secret + ", endpoints: [{url: 'https://hooks.example.com/', events: [run.done]}]}",
		"unsigned":        "webhooks: {endpoints: [{url: 'https://hooks.example.com/', events: ['*']}]}",
		"bad network":     "webhooks: {allow_networks: [169.254.0.0]}",
		"zero retry_for":  "webhooks: {retry_for: 0s}",
		"backoff upended": "webhooks: {min_backoff: 1m, max_backoff: 1s}",
	} {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "kerneld.yaml", body)
			cfg, err := loadConfig(flagValues{config: file}, env(nil))
			if err == nil {
				_, err = cfg.Webhooks.targets()
			}
			if err == nil || !strings.Contains(err.Error(), "webhooks") {
				t.Errorf("err = %v, want one about webhooks", err)
			}
		})
	}
}

// TestRun_WebhookDeliveries starts kerneld on the SQLite store: its
// outbox answers GET /webhooks/deliveries.
func TestRun_WebhookDeliveries(t *testing.T) {
	d := startInProcess(t, env(map[string]string{"KERNELD_WEBHOOK_SECRET": webhook.NewSecret()}))
	res, err := http.Get(d.base + "/webhooks/deliveries?state=failed")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page map[string]any
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /webhooks/deliveries = %d %v %v", res.StatusCode, page, err)
	}
	if data, ok := page["data"].([]any); !ok || len(data) != 0 {
		t.Errorf("data = %v, want an empty list", page["data"])
	}
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestRun_RefusesHooksToLinkLocal starts kerneld on an agent whose guard
// or webhook points at the metadata address: it refuses to start, naming
// the file and the field.
func TestRun_RefusesHooksToLinkLocal(t *testing.T) {
	secret := webhook.NewSecret()
	for name, hooks := range map[string]string{
		"guard":   "guard: {url: 'https://169.254.169.254/latest', secret: '" + secret + "'}",
		"webhook": "webhooks: [{url: 'https://[fd00:ec2::254]/', events: ['*']}]",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "a.yaml", "name: a\nmodel: {provider: scripted, script: [{text: hi}]}\n"+hooks+"\n")
			args := []string{"-addr", "127.0.0.1:0", "-agents-dir", dir, "-config", "../../configs/kerneld.yaml", "-data-dir", t.TempDir()}
			err := run(t.Context(), args, env(nil), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "a.yaml") || !strings.Contains(err.Error(), "link-local") {
				t.Fatalf("run = %v, want a refusal naming a.yaml and the link-local address", err)
			}
		})
	}
}

// hookReceiver is a webhook receiver that verifies every delivery's
// Standard Webhooks signature and keeps the payloads that pass.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	payloads []map[string]any
	ids      map[string]int // webhook-id: how often it came
	forged   int
	down     bool // answers 503 to everything, keeping nothing
}

// setDown takes the receiver down (503 to everything) or brings it back.
func (h *hookReceiver) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	t.Helper()
	return newHookReceiverAt(t, secret, "")
}

// newHookReceiverAt starts a receiver listening on addr, or on a free
// loopback port when addr is "".
func newHookReceiverAt(t *testing.T, secret, addr string) *hookReceiver {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{ids: map[string]int{}}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if err := key.Verify(r.Header, body, time.Now(), 5*time.Minute); err != nil {
			h.forged++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p map[string]any
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.ids[r.Header.Get("webhook-id")]++
		h.payloads = append(h.payloads, p)
	}))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Listener.Close() // the free port it chose
		h.Listener = l
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

// wait returns the first payload of type typ, waiting up to a deadline.
func (h *hookReceiver) wait(t *testing.T, typ string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for _, p := range h.payloads {
			if p["type"] == typ {
				h.mu.Unlock()
				return p
			}
		}
		h.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Fatalf("no %s webhook within 20s; got %v", typ, h.payloads)
	return nil
}

// TestRun_WebhooksOfASession names a receiver at a session's creation and
// drives the session through an approval, a run's end and its close: each
// reaches the receiver, signed, once.
func TestRun_WebhooksOfASession(t *testing.T) {
	secret := webhook.NewSecret()
	rcv := newHookReceiver(t, secret)
	d := startInProcess(t, env(map[string]string{"KERNELD_WEBHOOK_SECRET": secret}))

	sess := post(t, d.base+"/sessions", `{"agent":"gated","webhooks":[{"url":"`+rcv.URL+`","events":["*"]}]}`)
	id := sess["id"].(string)
	run := post(t, d.base+"/sessions/"+id+"/run", `{"input":"buy milk"}`)
	runID := run["id"].(string)

	asked := rcv.wait(t, webhook.ApprovalRequested)["data"].(map[string]any)
	if asked["run_id"] != runID || asked["tool_name"] != "memory_set" || asked["session_id"] != id {
		t.Fatalf("approval.requested data = %v", asked)
	}
	post(t, d.base+"/sessions/"+id+"/runs/"+runID+"/approvals/"+asked["tool_call_id"].(string), `{"decision":"approve"}`)
	decided := rcv.wait(t, webhook.ApprovalDecided)["data"].(map[string]any)
	if decided["decision"] != "approved" || decided["tool_name"] != "memory_set" {
		t.Errorf("approval.decided data = %v", decided)
	}
	finished := rcv.wait(t, webhook.RunFinished)["data"].(map[string]any)
	if finished["run_id"] != runID || finished["state"] != "succeeded" || finished["agent"] != "gated" {
		t.Errorf("run.finished data = %v", finished)
	}
	post(t, d.base+"/sessions/"+id+"/close", `{"reason":"done"}`)
	closed := rcv.wait(t, webhook.SessionClosed)["data"].(map[string]any)
	if closed["reason"] != "done" {
		t.Errorf("session.closed data = %v", closed)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for id, n := range rcv.ids {
		if n != 1 {
			t.Errorf("delivery %s came %d times, want once", id, n)
		}
	}
	if len(rcv.ids) != 4 || rcv.forged != 0 {
		t.Errorf("%d deliveries (%d forged), want the 4 above", len(rcv.ids), rcv.forged)
	}
}

// TestRun_SessionWebhooksRefused: a session may not name a receiver at a
// link-local address, an unknown event, or more than the bound.
func TestRun_SessionWebhooksRefused(t *testing.T) {
	d := startInProcess(t, env(map[string]string{"KERNELD_WEBHOOK_SECRET": webhook.NewSecret()}))
	five := strings.Repeat(`{"url":"https://hooks.example.com/","events":["*"]},`, 5)
	for name, hooks := range map[string]string{
		"link-local":    `[{"url":"http://169.254.169.254/latest","events":["*"]}]`,
		"plain http":    `[{"url":"http://hooks.example.com/","events":["*"]}]`,
		"unknown event": `[{"url":"https://hooks.example.com/","events":["run.done"]}]`,
		"no url":        `[{"events":["*"]}]`,
		"too many":      "[" + strings.TrimSuffix(five, ",") + "]",
	} {
		t.Run(name, func(t *testing.T) {
			res, err := http.Post(d.base+"/sessions", "application/json", strings.NewReader(`{"agent":"echo","webhooks":`+hooks+`}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "webhooks") {
				t.Errorf("POST /sessions = %d %s, want 400 naming webhooks", res.StatusCode, body)
			}
		})
	}
}

// TestProcess_WebhookSurvivesKill9 ends a run whose receiver is down, so
// its delivery waits in the SQLite outbox, kills kerneld with SIGKILL,
// brings the receiver up and starts kerneld again on the same data: the
// delivery arrives, once.
func TestProcess_WebhookSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin, data, secret := buildBinary(t), t.TempDir(), webhook.NewSecret()
	cfg := writeFile(t, t.TempDir(), "kerneld.yaml", "webhooks: {secret: '"+secret+"', min_backoff: 200ms, max_backoff: 500ms}\n")
	port := freePort(t)
	start := func() *process {
		p := &process{logs: &syncBuffer{}}
		p.cmd = exec.Command(bin, "-addr", "127.0.0.1:0", "-config", cfg, "-data-dir", data, "-agents-dir", "../../configs/agents")
		p.cmd.Stderr = p.logs
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		p.base = "http://" + waitAddr(t, p.logs.String)
		waitReady(t, p.base)
		return p
	}

	a := start()
	hook := fmt.Sprintf(`[{"url":"http://127.0.0.1:%d/hook","events":["run.finished"]}]`, port)
	id := post(t, a.base+"/sessions", `{"agent":"echo-fast","webhooks":`+hook+`}`)["id"].(string)
	runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"hi"}`)["id"].(string)
	waitRun(t, a.base, id, runID, "succeeded")
	waitDelivery(t, a.base, func(d map[string]any) bool { return d["state"] == "pending" && d["attempts"].(float64) >= 1 })
	a.kill9(t)

	rcv := newHookReceiverAt(t, secret, fmt.Sprintf("127.0.0.1:%d", port))
	b := start()
	got := rcv.wait(t, webhook.RunFinished)["data"].(map[string]any)
	if got["run_id"] != runID || got["session_id"] != id {
		t.Errorf("run.finished data = %v", got)
	}
	waitDelivery(t, b.base, func(d map[string]any) bool { return d["state"] == "delivered" })
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.ids) != 1 || rcv.forged != 0 {
		t.Errorf("deliveries = %v (%d forged), want one", rcv.ids, rcv.forged)
	}
	for id, n := range rcv.ids {
		if n != 1 {
			t.Errorf("delivery %s came %d times, want once", id, n)
		}
	}
}

// waitDelivery waits until the only webhook delivery kerneld at base
// lists satisfies ok.
func waitDelivery(t *testing.T, base string, ok func(map[string]any) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, page := getJSONMap(t, base+"/webhooks/deliveries")
		data, _ := page["data"].([]any)
		if len(data) == 1 && ok(data[0].(map[string]any)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries = %v after 20s", data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRun_WebhookQuotaExceeded: a run the tenant's max_concurrent_runs
// refuses is announced to the session's receivers as quota.exceeded.
func TestRun_WebhookQuotaExceeded(t *testing.T) {
	secret := webhook.NewSecret()
	rcv := newHookReceiver(t, secret)
	d := startInProcess(t, env(map[string]string{"KERNELD_WEBHOOK_SECRET": secret, "KERNELD_MAX_CONCURRENT_RUNS": "1"}))
	hooks := `"webhooks":[{"url":"` + rcv.URL + `","events":["quota.exceeded"]}]`
	busy := post(t, d.base+"/sessions", `{"agent":"gated",`+hooks+`}`)["id"].(string)
	runID := post(t, d.base+"/sessions/"+busy+"/run", `{"input":"wait for me"}`)["id"].(string)
	waitRun(t, d.base, busy, runID, "waiting_input") // holds the tenant's one run

	id := post(t, d.base+"/sessions", `{"agent":"echo",`+hooks+`}`)["id"].(string)
	status, _ := request(t, http.MethodPost, d.base+"/sessions/"+id+"/run", `{"input":"hi"}`)
	if status != http.StatusTooManyRequests {
		t.Fatalf("a second run = %d, want 429", status)
	}
	got := rcv.wait(t, webhook.QuotaExceeded)["data"].(map[string]any)
	if got["quota"] != "max_concurrent_runs" || got["session_id"] != id || got["agent"] != "echo" {
		t.Errorf("quota.exceeded data = %v", got)
	}
}
