package httpapi_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/webhook"
)

// TestOpenAPI_WebhooksAreTheEventTypes: api/openapi.yaml describes a
// webhook for each event type kerneld sends, and no other; the payload
// and delivery schemas list the same types, and every type's payload, as
// kerneld builds it, passes the payload schema.
func TestOpenAPI_WebhooksAreTheEventTypes(t *testing.T) {
	doc := mustLoadSpec(t).doc
	want := slices.Sorted(slices.Values(webhook.EventTypes))
	if got := slices.Sorted(maps.Keys(doc.Webhooks)); !slices.Equal(got, want) {
		t.Errorf("webhooks in api/openapi.yaml = %v, want %v", got, want)
	}
	payload := doc.Components.Schemas["WebhookPayload"].Value
	for _, schema := range []string{"WebhookPayload", "WebhookDelivery"} {
		var got []string
		for _, v := range doc.Components.Schemas[schema].Value.Properties["type"].Value.Enum {
			got = append(got, v.(string))
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("%s.type enum = %v, want %v", schema, got, want)
		}
	}

	targets, err := webhook.NewTargets(webhook.TargetsConfig{Secret: webhook.NewSecret(), Routes: []webhook.Route{
		{Endpoint: webhook.Endpoint{URL: "https://hooks.example.com/", Events: []string{webhook.AllEvents}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := session.Session{ID: "0354vLaJDioudAON49SGg6", Tenant: "acme", Agent: "helper"}
	run := session.Run{ID: "0354vLaJDktYmoHR1Tfmga", SessionID: s.ID, State: session.RunFailed, StartedAt: now, EndedAt: now,
		Error: &session.RunError{Code: "model_error", Message: "the model is down"}}
	for _, a := range []webhook.Announcement{
		webhook.AnnounceRunEnded(s, run),
		webhook.AnnounceApprovalRequested(s, run.ID, "call_1", "memory_set", json.RawMessage(`{"key":"k"}`), now),
		webhook.AnnounceApprovalDecided(s, run.ID, "call_1", "memory_set", "denied", "no", now),
		webhook.AnnounceSessionClosed(s, "done", now),
		webhook.AnnounceQuotaExceeded(session.Session{Tenant: "acme"}, "max_sessions", "100 sessions", now),
	} {
		ds, err := targets.Deliveries(a)
		if err != nil || len(ds) != 1 {
			t.Fatalf("deliveries of %s = %v, %v", a.Type, ds, err)
		}
		var body any
		if err := json.Unmarshal(ds[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		if err := payload.VisitJSON(body); err != nil {
			t.Errorf("%s payload %s does not pass WebhookPayload: %v", a.Type, ds[0].Body, err)
		}
	}
}
