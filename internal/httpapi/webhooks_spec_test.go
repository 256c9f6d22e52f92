package httpapi_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/webhook"
)

// TestOpenAPI_WebhooksAreTheEventTypes: api/openapi.yaml describes a
// webhook for each event type kerneld sends, and no other (beside the
// guard's request, TestOpenAPI_GuardRequest); the payload
// and delivery schemas list the same types, and every type's payload, as
// kerneld builds it, passes the payload schema.
func TestOpenAPI_WebhooksAreTheEventTypes(t *testing.T) {
	doc := mustLoadSpec(t).doc
	want := slices.Sorted(slices.Values(webhook.EventTypes))
	hooks := maps.Clone(doc.Webhooks)
	delete(hooks, "guard") // sent to an agent's guard, not to receivers
	if got := slices.Sorted(maps.Keys(hooks)); !slices.Equal(got, want) {
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

// TestOpenAPI_GuardRequest: the requests kerneld sends an agent's guard
// (about a tool call, a run, and a continued run) pass the spec's
// GuardRequest, and the decisions the README shows pass GuardDecision.
func TestOpenAPI_GuardRequest(t *testing.T) {
	doc := mustLoadSpec(t).doc
	reqSchema, decSchema := doc.Components.Schemas["GuardRequest"].Value, doc.Components.Schemas["GuardDecision"].Value
	if doc.Webhooks["guard"] == nil {
		t.Fatal("api/openapi.yaml has no webhooks/guard")
	}
	secret := webhook.NewSecret()
	bodies := make(chan []byte, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bodies <- body
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	defer srv.Close()
	g, err := guard.New(guard.Config{URL: srv.URL, Secret: secret}, webhook.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	c := guard.NewCaller(webhook.Policy{}, "kerneld/test")
	sess := guard.Session{ID: "s1", Tenant: "acme", Agent: "helper", Metadata: map[string]string{"k": "v"}, ParentID: "s0", Depth: 1}
	c.CheckToolCall(t.Context(), g, sess, "r1", guard.ToolCall{ID: "call_1", Name: "memory_set", Arguments: json.RawMessage(`{"key":"k"}`)})
	c.CheckRun(t.Context(), g, sess, "r1", "hello", nil)
	c.CheckRun(t.Context(), g, sess, "r1", "hello", &guard.Resume{Step: 2, Reason: session.ResumeTakeover})
	for range 3 {
		body := <-bodies
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if err := reqSchema.VisitJSON(v); err != nil {
			t.Errorf("guard request %s does not pass GuardRequest: %v", body, err)
		}
	}
	for _, answer := range []string{
		`{"decision":"allow"}`, `{"decision":"deny","reason":"no"}`, `{"decision":"ask","reason":"look"}`,
		`{"decision":"rewrite","arguments":{"key":"note"}}`, `{"decision":"annotate","annotation":"free plan"}`,
	} {
		var v any
		_ = json.Unmarshal([]byte(answer), &v)
		if err := decSchema.VisitJSON(v); err != nil {
			t.Errorf("decision %s does not pass GuardDecision: %v", answer, err)
		}
	}
}
