package anthropic_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// TestKernel_RunThroughAnthropic_Error: a failed call ends the run with
// RUN_ERROR model_error and a message safe to show.
func TestKernel_RunThroughAnthropic_Error(t *testing.T) {
	s := llmtest.NewServer(t, llmtest.Status(401, nil, apiError("authentication_error", "invalid x-api-key "+testKey)))
	agent := `
name: claude
model: {provider: anthropic, name: claude-sonnet-4-5, base_url: "` + s.URL() + `", api_key: ` + testKey + `}
`
	k := kerneltest.New(t, kerneltest.Options{Agents: []string{agent}, Providers: map[string]llm.Factory{"anthropic": anthropic.New}})
	evs := kerneltest.RunToEnd(t, k.Kernel, "claude", "Hi")
	aguitest.Verify(t, evs)
	assert.JSONEq(t, `"model_error"`, kerneltest.Member(t, evs, session.EventRunError, "code"))
	assert.JSONEq(t, `"anthropic: 401 Unauthorized: invalid x-api-key [redacted]"`, kerneltest.Member(t, evs, session.EventRunError, "message"))
	assert.Len(t, s.Requests(), 1)
}
