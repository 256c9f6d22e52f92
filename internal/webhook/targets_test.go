package webhook_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/webhook"
)

var (
	secretDefault = webhook.NewSecret()
	secretAcme    = webhook.NewSecret()
	secretOwn     = webhook.NewSecret()
)

func mustTargets(t *testing.T, cfg webhook.TargetsConfig) *webhook.Targets {
	t.Helper()
	tg, err := webhook.NewTargets(cfg)
	require.NoError(t, err)
	return tg
}

func keyID(t *testing.T, secret string) string {
	t.Helper()
	k, err := webhook.ParseSecret(secret)
	require.NoError(t, err)
	return k.ID
}

func TestTargets_Deliveries(t *testing.T) {
	tg := mustTargets(t, webhook.TargetsConfig{
		Secret: secretDefault, TenantSecrets: map[string]string{"acme": secretAcme},
		Routes: []webhook.Route{
			{Endpoint: webhook.Endpoint{URL: "https://ops.example.com/all", Events: []string{"*"}, Secret: secretOwn}},
			{Endpoint: webhook.Endpoint{URL: "https://acme.example.com/runs", Events: []string{webhook.RunFinished}}, Tenant: "acme"},
			{Endpoint: webhook.Endpoint{URL: "https://globex.example.com/", Events: []string{"*"}}, Tenant: "globex"},
			{Endpoint: webhook.Endpoint{URL: "https://helper.example.com/", Events: []string{"*"}}, Agent: "helper"},
		},
	})
	a := webhook.Announcement{
		Type: webhook.RunFinished, Key: "run/r1/ended", Tenant: "acme", Agent: "echo", SessionID: "s1", RunID: "r1",
		Time: time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC), Data: map[string]any{"state": "succeeded"},
		Endpoints: []webhook.Endpoint{
			{URL: "https://session.example.com/hook", Events: []string{webhook.RunFinished}},
			{URL: "https://acme.example.com/runs", Events: []string{"*"}}, // the same URL again: one delivery
			{URL: "https://session.example.com/approvals", Events: []string{webhook.ApprovalRequested}},
		},
	}
	ds, err := tg.Deliveries(a)
	require.NoError(t, err)
	byURL := map[string]webhook.Delivery{}
	for _, d := range ds {
		byURL[d.URL] = d
	}
	assert.Len(t, ds, 3)
	assert.Equal(t, keyID(t, secretOwn), byURL["https://ops.example.com/all"].KeyID, "an endpoint's own secret first")
	assert.Equal(t, keyID(t, secretAcme), byURL["https://acme.example.com/runs"].KeyID, "then its tenant's")
	assert.Equal(t, keyID(t, secretAcme), byURL["https://session.example.com/hook"].KeyID)

	d := byURL["https://session.example.com/hook"]
	assert.Equal(t, webhook.StatePending, d.State)
	assert.Equal(t, "acme", d.Tenant)
	assert.True(t, d.NextAt.Equal(a.Time.Truncate(time.Microsecond)))
	var body map[string]any
	require.NoError(t, json.Unmarshal(d.Body, &body))
	assert.Equal(t, map[string]any{"type": "run.finished", "timestamp": "2030-01-02T03:04:05.000006Z", "data": map[string]any{
		"tenant": "acme", "agent": "echo", "session_id": "s1", "run_id": "r1", "state": "succeeded",
	}}, body)

	again, err := tg.Deliveries(a)
	require.NoError(t, err)
	assert.Equal(t, ds[0].ID, again[0].ID, "the same announcement gets the same ids")
	a.Key = "run/r2/ended"
	other, err := tg.Deliveries(a)
	require.NoError(t, err)
	assert.NotEqual(t, ds[0].ID, other[0].ID)

	globex, err := tg.Deliveries(webhook.Announcement{Type: webhook.SessionClosed, Key: "closed", Tenant: "globex", Agent: "helper", SessionID: "s2"})
	require.NoError(t, err)
	urls := []string{}
	for _, d := range globex {
		urls = append(urls, d.URL)
		assert.Equal(t, keyID(t, map[bool]string{true: secretOwn, false: secretDefault}[d.URL == "https://ops.example.com/all"]), d.KeyID)
	}
	assert.ElementsMatch(t, []string{"https://ops.example.com/all", "https://globex.example.com/", "https://helper.example.com/"}, urls)
}

func TestNewTargets_Refuses(t *testing.T) {
	for name, cfg := range map[string]webhook.TargetsConfig{
		"bad secret": {Secret: "hunter2"},
		"link-local endpoint": {Secret: secretDefault, Routes: []webhook.Route{
			{Endpoint: webhook.Endpoint{URL: "https://169.254.169.254/", Events: []string{"*"}}}}},
		"plain http": {Secret: secretDefault, Routes: []webhook.Route{
			{Endpoint: webhook.Endpoint{URL: "http://hooks.example.com/", Events: []string{"*"}}}}},
		"unknown event": {Secret: secretDefault, Routes: []webhook.Route{
			{Endpoint: webhook.Endpoint{URL: "https://hooks.example.com/", Events: []string{"run.done"}}}}},
		"no events": {Secret: secretDefault, Routes: []webhook.Route{{Endpoint: webhook.Endpoint{URL: "https://hooks.example.com/"}}}},
		"nothing signs it": {Routes: []webhook.Route{
			{Endpoint: webhook.Endpoint{URL: "https://hooks.example.com/", Events: []string{"*"}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.NewTargets(cfg)
			assert.Error(t, err)
		})
	}
}

func TestTargets_CheckSessionEndpoints(t *testing.T) {
	tg := mustTargets(t, webhook.TargetsConfig{TenantSecrets: map[string]string{"acme": secretAcme}, MaxPerSession: 2})
	ok := webhook.Endpoint{URL: "https://hooks.example.com/", Events: []string{webhook.RunFinished}}
	assert.NoError(t, tg.CheckSessionEndpoints("acme", []webhook.Endpoint{ok, ok}))
	assert.Error(t, tg.CheckSessionEndpoints("acme", []webhook.Endpoint{ok, ok, ok}), "bounded count")
	assert.Error(t, tg.CheckSessionEndpoints("globex", []webhook.Endpoint{ok}), "no secret for globex")
	assert.Error(t, tg.CheckSessionEndpoints("acme", []webhook.Endpoint{{URL: "https://[fe80::1]/", Events: []string{"*"}}}))
	assert.Error(t, tg.CheckSessionEndpoints("acme", []webhook.Endpoint{{URL: "https://hooks.example.com/", Events: []string{"nope"}}}))
	assert.NoError(t, tg.CheckSessionEndpoints("globex", nil), "no webhooks, nothing to sign")
}
