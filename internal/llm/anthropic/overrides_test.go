package anthropic_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// TestKernel_Overrides: the model and the reasoning effort a run picked
// reach the Messages request, the effort as a thinking budget with room
// left for the answer; the run records the model; a model the agent does
// not list is refused.
func TestKernel_Overrides(t *testing.T) {
	s := llmtest.NewServer(t,
		stream(messageStart(10), textStart(0), textDelta(0, "Hi."), blockStop(0), messageDelta("end_turn", 2), messageStop),
	)
	k := mustKernel(t, `
name: claude
model: {provider: anthropic, name: claude-sonnet-4-5, base_url: "`+s.URL()+`", api_key: `+testKey+`, max_tokens: 1024}
overrides: {models: [claude-haiku-4-5], reasoning_effort: true}
`)
	ctx := t.Context()
	sess, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "claude"})
	require.NoError(t, err)
	_, _, err = k.Run(ctx, sess.ID, kernel.RunRequest{Input: "Hi", Overrides: &session.Overrides{Model: "claude-opus-4"}})
	require.ErrorIs(t, err, errdefs.ErrUnprocessable)
	assert.Equal(t, "override_not_allowed", string(errdefs.CodeOf(err)))

	evs := kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Hi",
		Overrides: &session.Overrides{Model: "claude-haiku-4-5", ReasoningEffort: "low"}})
	aguitest.Verify(t, evs)
	reqs := s.Requests()
	require.Len(t, reqs, 1)
	assert.JSONEq(t, `"claude-haiku-4-5"`, reqs[0].Member(t, "model"))
	assert.JSONEq(t, `{"type":"enabled","budget_tokens":2048}`, reqs[0].Member(t, "thinking"))
	assert.JSONEq(t, `3072`, reqs[0].Member(t, "max_tokens"), "the answer keeps its 1024 tokens on top of the budget")
	assert.NotContains(t, reqs[0].Body, "temperature", "thinking takes no temperature")
	assert.JSONEq(t, `[{"inputTokens":10,"outputTokens":2,"totalTokens":12,"provider":"anthropic","model":"claude-haiku-4-5"}]`,
		kerneltest.Member(t, evs, session.EventRunFinished, "usage"))
	run, err := k.GetRun(ctx, sess.ID, evs[0].RunID)
	require.NoError(t, err)
	assert.Equal(t, "claude-haiku-4-5", run.Model)
}
