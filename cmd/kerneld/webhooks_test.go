package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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
