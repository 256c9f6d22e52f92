package guard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// policyServer is a guard: it checks each request's signature and answers
// with answer(request).
type policyServer struct {
	*httptest.Server
	key    webhook.Key
	mu     sync.Mutex
	seen   []map[string]any
	answer func(req map[string]any) (int, string)
}

func newPolicyServer(t *testing.T, secret string, answer func(req map[string]any) (int, string)) *policyServer {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	require.NoError(t, err)
	ps := &policyServer{key: key, answer: answer}
	ps.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := key.Verify(r.Header, body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ps.mu.Lock()
		ps.seen = append(ps.seen, req)
		ps.mu.Unlock()
		status, out := ps.answer(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(ps.Close)
	return ps
}

func (ps *policyServer) requests() []map[string]any {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]map[string]any(nil), ps.seen...)
}

var sess = guard.Session{ID: "s1", Tenant: "acme", Agent: "helper", Metadata: map[string]string{"user": "ada"}}

func mustGuard(t *testing.T, c guard.Config) guard.Guard {
	t.Helper()
	g, err := guard.New(c, webhook.Policy{})
	require.NoError(t, err)
	return g
}

func TestCheckToolCall(t *testing.T) {
	secret := webhook.NewSecret()
	answers := map[string]string{
		"allow":        `{"decision":"allow"}`,
		"deny":         `{"decision":"deny","reason":"writes are off on weekends"}`,
		"ask":          `{"decision":"ask","reason":"a large transfer"}`,
		"rewrite":      `{"decision":"rewrite","reason":"redacted","arguments":{"key":"note","value":"[redacted]"}}`,
		"rewrite-bare": `{"decision":"rewrite"}`,
		"annotate":     `{"decision":"annotate","annotation":"x"}`,
		"garbage":      `not json`,
	}
	ps := newPolicyServer(t, secret, func(req map[string]any) (int, string) {
		return http.StatusOK, answers[req["tool_call"].(map[string]any)["name"].(string)]
	})
	g := mustGuard(t, guard.Config{URL: ps.URL, Secret: secret})
	c := guard.NewCaller(webhook.Policy{}, "kerneld/test")
	call := func(name string) guard.Decision {
		return c.CheckToolCall(t.Context(), g, sess, "r1", guard.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(`{"key":"note","value":"secret"}`)})
	}

	assert.Equal(t, guard.Allow, call("allow").Action)
	d := call("deny")
	assert.Equal(t, guard.Deny, d.Action)
	assert.Equal(t, "writes are off on weekends", d.Reason)
	assert.False(t, d.Failed)
	assert.Equal(t, guard.Ask, call("ask").Action)
	d = call("rewrite")
	assert.Equal(t, guard.Rewrite, d.Action)
	assert.JSONEq(t, `{"key":"note","value":"[redacted]"}`, string(d.Arguments))
	for _, bad := range []string{"rewrite-bare", "annotate", "garbage"} {
		d = call(bad)
		assert.True(t, d.Failed, bad)
		assert.Equal(t, guard.Deny, d.Action, "%s: fail closed by default", bad)
		assert.NotEmpty(t, d.Error)
	}

	req := ps.requests()[0]
	assert.Equal(t, "tool_call", req["type"])
	assert.Equal(t, "r1", req["run_id"])
	assert.Equal(t, map[string]any{"id": "s1", "tenant": "acme", "agent": "helper", "metadata": map[string]any{"user": "ada"}, "depth": float64(0)}, req["session"])
	assert.Equal(t, map[string]any{"id": "call_1", "name": "allow", "arguments": map[string]any{"key": "note", "value": "secret"},
		"requires_approval": false}, req["tool_call"])
	assert.Regexp(t, `^grd_[0-9a-f]{24}$`, req["id"])
}

func TestCheckRun(t *testing.T) {
	secret := webhook.NewSecret()
	answers := map[string]string{
		"hello":       `{"decision":"allow"}`,
		"drop tables": `{"decision":"deny","reason":"not in this workspace"}`,
		"summarise":   `{"decision":"annotate","annotation":"The user is on the free plan."}`,
		"ask first":   `{"decision":"ask"}`,
	}
	ps := newPolicyServer(t, secret, func(req map[string]any) (int, string) { return http.StatusOK, answers[req["input"].(string)] })
	g := mustGuard(t, guard.Config{URL: ps.URL, Secret: secret, BeforeRun: true})
	c := guard.NewCaller(webhook.Policy{}, "kerneld/test")

	assert.Equal(t, guard.Allow, c.CheckRun(t.Context(), g, sess, "r1", "hello", nil).Action)
	d := c.CheckRun(t.Context(), g, sess, "r2", "drop tables", nil)
	assert.Equal(t, guard.Deny, d.Action)
	assert.Equal(t, "not in this workspace", d.Reason)
	d = c.CheckRun(t.Context(), g, sess, "r3", "summarise", nil)
	assert.Equal(t, guard.Annotate, d.Action)
	assert.Equal(t, "The user is on the free plan.", d.Annotation)
	d = c.CheckRun(t.Context(), g, sess, "r4", "ask first", nil)
	assert.True(t, d.Failed, "a run cannot be asked about")
	assert.Equal(t, guard.Deny, d.Action)

	req := ps.requests()[0]
	assert.Equal(t, "before_run", req["type"])
	assert.Equal(t, "hello", req["input"])
	assert.NotContains(t, req, "tool_call")
}

func TestFailure(t *testing.T) {
	secret := webhook.NewSecret()
	release := make(chan struct{})
	slow := newPolicyServer(t, secret, func(map[string]any) (int, string) {
		<-release
		return http.StatusOK, `{"decision":"allow"}`
	})
	defer close(release)
	broken := newPolicyServer(t, secret, func(map[string]any) (int, string) { return http.StatusInternalServerError, `{}` })
	c := guard.NewCaller(webhook.Policy{}, "kerneld/test")
	for _, tt := range []struct {
		name      string
		url       string
		onFailure string
		want      guard.Action
		errWant   string
	}{
		{"timeout, fail closed", slow.URL, "", guard.Deny, "no answer within 100ms"},
		{"timeout, fail open", slow.URL, guard.OnFailureAllow, guard.Allow, "no answer within 100ms"},
		{"500, fail closed", broken.URL, guard.OnFailureDeny, guard.Deny, "the guard answered 500"},
		{"500, fail open", broken.URL, guard.OnFailureAllow, guard.Allow, "the guard answered 500"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGuard(t, guard.Config{URL: tt.url, Secret: secret, Timeout: 100 * time.Millisecond, OnFailure: tt.onFailure})
			d := c.CheckToolCall(t.Context(), g, sess, "r1", guard.ToolCall{ID: "c", Name: "memory_set"})
			assert.True(t, d.Failed)
			assert.Equal(t, tt.want, d.Action)
			assert.Contains(t, d.Error, tt.errWant)
			if tt.want == guard.Deny {
				assert.Contains(t, d.Reason, "the guard did not answer")
			}
		})
	}
}

func TestNew(t *testing.T) {
	secret := webhook.NewSecret()
	g := mustGuard(t, guard.Config{URL: "https://policy.example.com/kerneld", Secret: secret})
	assert.Equal(t, guard.DefaultTimeout, g.Timeout)
	assert.False(t, g.FailOpen, "fail closed by default")
	for name, c := range map[string]guard.Config{
		"link-local":       {URL: "https://169.254.169.254/", Secret: secret},
		"plain http":       {URL: "http://policy.example.com/", Secret: secret},
		"no secret":        {URL: "https://policy.example.com/"},
		"bad secret":       {URL: "https://policy.example.com/", Secret: "hunter2"},
		"bad on_failure":   {URL: "https://policy.example.com/", Secret: secret, OnFailure: "maybe"},
		"negative timeout": {URL: "https://policy.example.com/", Secret: secret, Timeout: -time.Second},
	} {
		_, err := guard.New(c, webhook.Policy{})
		assert.Error(t, err, name)
	}
}
