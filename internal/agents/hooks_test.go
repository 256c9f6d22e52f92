package agents_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
)

const guardedYAML = `
name: guarded
model: {provider: fake, name: m}
tools: [memory_set]
guard:
  url: https://policy.example.com/kerneld
  secret: ${GUARD_SECRET}
  timeout: 2s
  on_failure: allow
  before_run: true
webhooks:
  - {url: "https://hooks.example.com/a", events: [run.finished, approval.requested]}
  - url: http://127.0.0.1:9000/b
    events: ["*"]
`

func TestLoad_GuardAndWebhooks(t *testing.T) {
	reg, err := agents.Load(mustWriteDir(t, map[string]string{"guarded.yaml": guardedYAML}),
		testOptions(map[string]string{"GUARD_SECRET": "whsec_x"}))
	require.NoError(t, err)
	s, err := reg.Get("guarded")
	require.NoError(t, err)
	assert.Equal(t, &agents.GuardSpec{URL: "https://policy.example.com/kerneld", Secret: "whsec_x", Timeout: 2 * time.Second,
		OnFailure: "allow", BeforeRun: true}, s.Guard)
	assert.Equal(t, []agents.WebhookSpec{
		{URL: "https://hooks.example.com/a", Events: []string{"run.finished", "approval.requested"}},
		{URL: "http://127.0.0.1:9000/b", Events: []string{"*"}},
	}, s.Webhooks)
}

func TestLoad_GuardAndWebhooksRefused(t *testing.T) {
	check := testOptions(map[string]string{"GUARD_SECRET": "whsec_x"})
	check.CheckGuard = func(g agents.GuardSpec) error {
		if strings.Contains(g.URL, "169.254") {
			return errors.New("url: a link-local address")
		}
		return nil
	}
	check.CheckWebhook = func(w agents.WebhookSpec) error {
		if len(w.Events) == 0 {
			return errors.New("events: name at least one")
		}
		return nil
	}
	for _, tt := range []struct {
		name, edit, want string
		env              map[string]string
	}{
		{"unset secret", "", "guard.secret: required: the guard's requests are signed (GUARD_SECRET not set)", map[string]string{}},
		{"link-local guard", "https://policy.example.com/kerneld=>https://169.254.169.254/", "guard.url: a link-local address", nil},
		{"webhook without events", `events: ["*"]=>events: []`, "webhooks[1].events: name at least one", nil},
		{"unknown guard key", "before_run: true=>before_runs: true", "guard.before_runs", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := guardedYAML
			if from, to, ok := strings.Cut(tt.edit, "=>"); ok {
				yaml = strings.Replace(yaml, from, to, 1)
			}
			opts := check
			if tt.env != nil {
				opts.Getenv = func(k string) string { return tt.env[k] }
			}
			_, err := agents.Load(mustWriteDir(t, map[string]string{"guarded.yaml": yaml}), opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
