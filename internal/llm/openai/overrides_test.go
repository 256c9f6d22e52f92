package openai_test

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

// TestKernel_Overrides: the model a session picked and the reasoning
// effort a run picked reach the OpenAI request; the run records the model
// and reports its usage under it; a model the agent does not list is
// refused.
func TestKernel_Overrides(t *testing.T) {
	s := llmtest.NewServer(t,
		stream(roleChunk(), textChunk("Hi."), finishChunk("stop"), usageChunk(10, 2), done),
		stream(roleChunk(), textChunk("Hi again."), finishChunk("stop"), usageChunk(12, 3), done),
	)
	k := mustKernel(t, `
name: gpt
model: {provider: openai, name: gpt-4o-mini, base_url: "`+baseURL(s)+`", api_key: `+testKey+`}
overrides: {models: [gpt-4o], reasoning_effort: true}
`)
	ctx := t.Context()
	_, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "gpt", Overrides: &session.Overrides{Model: "gpt-5"}})
	require.ErrorIs(t, err, errdefs.ErrUnprocessable)
	assert.Equal(t, "override_not_allowed", string(errdefs.CodeOf(err)))
	assert.ErrorContains(t, err, "overrides.model gpt-5")

	sess, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "gpt", Overrides: &session.Overrides{Model: "gpt-4o"}})
	require.NoError(t, err)
	_, _, err = k.Run(ctx, sess.ID, kernel.RunRequest{Input: "Hi", Overrides: &session.Overrides{Temperature: new(0.5)}})
	assert.Equal(t, "override_not_allowed", string(errdefs.CodeOf(err)), "temperature is not listed")

	evs := kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Hi", Overrides: &session.Overrides{ReasoningEffort: "high"}})
	aguitest.Verify(t, evs)
	reqs := s.Requests()
	require.Len(t, reqs, 1)
	assert.JSONEq(t, `"gpt-4o"`, reqs[0].Member(t, "model"))
	assert.JSONEq(t, `"high"`, reqs[0].Member(t, "reasoning_effort"))
	assert.JSONEq(t, `[{"inputTokens":10,"outputTokens":2,"totalTokens":12,"provider":"openai","model":"gpt-4o"}]`,
		kerneltest.Member(t, evs, session.EventRunFinished, "usage"))
	assert.Contains(t, string(evs[0].AppendJSON(nil)), `"model":"gpt-4o"`, "RUN_STARTED names the model")
	runs, err := k.ListRuns(ctx, sess.ID, kernel.PageRequest{})
	require.NoError(t, err)
	require.Len(t, runs.Items, 1)
	assert.Equal(t, "gpt-4o", runs.Items[0].Model)
	assert.Equal(t, "high", runs.Items[0].Overrides.ReasoningEffort)

	// Back to the agent's model: the change is logged, and no effort is sent.
	_, err = k.UpdateSession(ctx, sess.ID, kernel.SessionUpdate{Overrides: &session.Overrides{}})
	require.NoError(t, err)
	evs = kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Hi again"})
	aguitest.Verify(t, evs)
	reqs = s.Requests()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `"gpt-4o-mini"`, reqs[1].Member(t, "model"))
	assert.NotContains(t, reqs[1].Body, "reasoning_effort")
	assert.JSONEq(t, `{"runId":"`+evs[len(evs)-1].RunID+`","from":"gpt-4o","to":"gpt-4o-mini"}`,
		kerneltest.Member(t, evs, session.EventCustom, "value"))
}
