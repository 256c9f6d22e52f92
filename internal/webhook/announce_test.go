package webhook_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/webhook"
)

func TestAnnounce(t *testing.T) {
	sess := session.Session{ID: "s1", Tenant: "acme", Agent: "helper"}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	run := session.Run{ID: "r1", SessionID: "s1", StartedAt: at.Add(-time.Second), EndedAt: at,
		Usage: session.Usage{InputTokens: 10, OutputTokens: 5}}
	for state, want := range map[session.RunState]string{
		session.RunSucceeded: webhook.RunFinished, session.RunFailed: webhook.RunFailed,
		session.RunCancelled: webhook.RunCancelled, session.RunInterrupted: webhook.RunCancelled,
	} {
		run.State = state
		a := webhook.AnnounceRunEnded(sess, run)
		assert.Equal(t, want, a.Type, state)
		assert.Equal(t, "run/r1/ended", a.Key)
		assert.Equal(t, at, a.Time)
	}
	run.State, run.Error = session.RunFailed, &session.RunError{Code: "model_error", Message: "429"}
	tg := mustTargets(t, webhook.TargetsConfig{Secret: secretDefault})
	ds, err := tg.Deliveries(withEndpoint(webhook.AnnounceRunEnded(sess, run)))
	require.NoError(t, err)
	require.Len(t, ds, 1)
	var body map[string]any
	require.NoError(t, json.Unmarshal(ds[0].Body, &body))
	assert.Equal(t, map[string]any{
		"tenant": "acme", "agent": "helper", "session_id": "s1", "run_id": "r1", "state": "failed",
		"started_at": "2030-01-02T03:04:04Z", "usage": map[string]any{"input_tokens": float64(10), "output_tokens": float64(5)},
		"error": map[string]any{"code": "model_error", "message": "429"},
	}, body["data"])

	req := webhook.AnnounceApprovalRequested(sess, "r1", "call_1", "memory_set", nil, at)
	assert.Equal(t, webhook.ApprovalRequested, req.Type)
	dec := webhook.AnnounceApprovalDecided(sess, "r1", "call_1", "memory_set", "denied", "not today", at)
	assert.NotEqual(t, req.Key, dec.Key, "one fact each")
	assert.Equal(t, "not today", dec.Data["reason"])
	assert.Equal(t, webhook.SessionClosed, webhook.AnnounceSessionClosed(sess, "done", at).Type)

	q1 := webhook.AnnounceQuotaExceeded(sess, "runs_per_minute", "300 runs a minute", at)
	q2 := webhook.AnnounceQuotaExceeded(sess, "runs_per_minute", "300 runs a minute", at.Add(30*time.Second))
	q3 := webhook.AnnounceQuotaExceeded(sess, "runs_per_minute", "300 runs a minute", at.Add(90*time.Second))
	assert.Equal(t, q1.Key, q2.Key, "at most one a minute")
	assert.NotEqual(t, q1.Key, q3.Key)
}

func withEndpoint(a webhook.Announcement) webhook.Announcement {
	a.Endpoints = []webhook.Endpoint{{URL: "https://hooks.example.com/", Events: []string{"*"}}}
	return a
}
