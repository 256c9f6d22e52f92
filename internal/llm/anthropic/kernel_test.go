package anthropic_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// mustKernel builds a real kernel whose one agent is defined by the YAML
// text agentYAML and may use the anthropic provider.
func mustKernel(tb testing.TB, agentYAML string) *kerneltest.Kernel {
	tb.Helper()
	return kerneltest.New(tb, kerneltest.Options{
		Agents:    []string{agentYAML},
		Providers: map[string]llm.Factory{"anthropic": anthropic.New},
	})
}

// TestKernel_RunThroughAnthropic_Error: a failed call ends the run with
// RUN_ERROR model_error and a message safe to show.
func TestKernel_RunThroughAnthropic_Error(t *testing.T) {
	f := newFake(t, status(401, nil, apiError("authentication_error", "invalid x-api-key "+testKey)))
	k := mustKernel(t, `
name: claude
model: {provider: anthropic, name: claude-sonnet-4-5, base_url: "`+f.srv.URL+`", api_key: `+testKey+`}
`)
	evs := kerneltest.RunToEnd(t, k.Kernel, "claude", "Hi")
	aguitest.Verify(t, evs)
	assert.JSONEq(t, `"model_error"`, kerneltest.Member(t, evs, session.EventRunError, "code"))
	assert.JSONEq(t, `"anthropic: 401 Unauthorized: invalid x-api-key [redacted]"`, kerneltest.Member(t, evs, session.EventRunError, "message"))
	assert.Len(t, f.requests(), 1)
}
