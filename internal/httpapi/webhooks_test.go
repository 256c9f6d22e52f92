package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/webhooktest"
)

// TestWebhookDeliveries fails a delivery against a receiver answering
// 500, finds it among acme's dead letters (and not among another
// tenant's), and redelivers it once the receiver is fixed.
func TestWebhookDeliveries(t *testing.T) {
	secret := webhook.NewSecret()
	rcv := webhooktest.NewReceiver(t, secret)
	rcv.SetStatus(func() int { return http.StatusInternalServerError })
	targets, err := webhook.NewTargets(webhook.TargetsConfig{Secret: secret})
	require.NoError(t, err)
	outbox := memory.New()
	d := webhook.NewDispatcher(webhook.DispatcherOptions{Outbox: outbox, Keys: targets.Keys(), RetryFor: 100 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, PollEvery: 10 * time.Millisecond})
	d.Start()
	t.Cleanup(func() { assert.NoError(t, d.Close(context.Background())) })
	ts := newServer(t, serverOptions{api: httpapi.Options{Webhooks: d, APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
	acme, other := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}

	empty := ts.must(t, http.StatusOK, "GET", "/webhooks/deliveries", "", acme...)
	assert.Equal(t, []any{}, empty["data"])
	ds, err := targets.Deliveries(webhook.Announcement{Type: webhook.RunFailed, Key: "run/r1/ended", Tenant: "acme",
		SessionID: "s1", RunID: "r1", Time: time.Now(), Endpoints: []webhook.Endpoint{{URL: rcv.URL, Events: []string{"*"}}}})
	require.NoError(t, err)
	require.NoError(t, d.Enqueue(t.Context(), ds...))
	id := ds[0].ID

	var dead map[string]any
	deadline := time.Now().Add(15 * time.Second)
	for {
		dead = ts.must(t, http.StatusOK, "GET", "/webhooks/deliveries?state=failed", "", acme...)
		if len(dead["data"].([]any)) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the delivery was not dead-lettered within 15s")
		time.Sleep(10 * time.Millisecond)
	}
	got := dead["data"].([]any)[0].(map[string]any)
	assert.Equal(t, id, got["id"])
	assert.Equal(t, "failed", got["state"])
	assert.Equal(t, float64(500), got["last_status"])
	assert.Nil(t, got["next_attempt_at"])
	assert.Equal(t, "run.failed", got["payload"].(map[string]any)["type"])
	assert.Nil(t, dead["next_cursor"])

	assert.Equal(t, []any{}, ts.must(t, http.StatusOK, "GET", "/webhooks/deliveries", "", other...)["data"], "tenant-scoped")
	ts.must(t, http.StatusNotFound, "POST", "/webhooks/deliveries/"+id+"/redeliver", "", other...)

	rcv.SetStatus(nil)
	again := ts.must(t, http.StatusAccepted, "POST", "/webhooks/deliveries/"+id+"/redeliver", "", acme...)
	assert.Equal(t, "pending", again["state"])
	assert.Equal(t, float64(0), again["attempts"])
	assert.Equal(t, id, rcv.Next(t, 15*time.Second).ID)
	for {
		list := ts.must(t, http.StatusOK, "GET", "/webhooks/deliveries?state=delivered", "", acme...)
		if len(list["data"].([]any)) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the redelivery was not recorded within 15s")
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWebhookDeliveries_BadRequests(t *testing.T) {
	d := webhook.NewDispatcher(webhook.DispatcherOptions{Outbox: memory.New()})
	ts := newServer(t, serverOptions{api: httpapi.Options{Webhooks: d}})
	assert.Equal(t, "invalid_request", ts.must(t, http.StatusBadRequest, "GET", "/webhooks/deliveries?state=lost", "")["code"])
	ts.must(t, http.StatusBadRequest, "GET", "/webhooks/deliveries?cursor=nope", "")
	ts.must(t, http.StatusBadRequest, "GET", "/webhooks/deliveries?limit=500", "")
	assert.Equal(t, "unknown_parameter", ts.must(t, http.StatusBadRequest, "GET", "/webhooks/deliveries?tenant=x", "")["code"])
	assert.Equal(t, "delivery_not_found", ts.must(t, http.StatusNotFound, "POST", "/webhooks/deliveries/msg_nope/redeliver", "")["code"])

	off := newServer(t, serverOptions{})
	assert.Equal(t, "webhooks_disabled", off.must(t, http.StatusNotFound, "GET", "/webhooks/deliveries", "")["code"])
}
