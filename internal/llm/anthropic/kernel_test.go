package anthropic_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/tools"
)

// mustKernel builds a real kernel whose agents are defined by the YAML
// texts agents and may use the anthropic provider.
func mustKernel(tb testing.TB, agents ...string) *kerneltest.Kernel {
	tb.Helper()
	return kerneltest.New(tb, kerneltest.Options{Agents: agents, Providers: map[string]llm.Factory{"anthropic": anthropic.New}})
}

// TestKernel_RunThroughAnthropic runs a real kernel against the fake server
// through thinking and a tool-call round trip, and checks that the run has
// the shape a scripted model's run with the same steps has.
func TestKernel_RunThroughAnthropic(t *testing.T) {
	s := llmtest.NewServer(t,
		stream(messageStart(120), thinkingStart(0), thinkingDelta(0, "Need the clock."), signatureDelta(0, signature), blockStop(0),
			textStart(1), textDelta(1, "Let me check."), blockStop(1),
			toolStart(2, "toolu_t1", "current_time"), inputDelta(2, `{"timezone":`), inputDelta(2, `"UTC"}`), blockStop(2),
			messageDelta("tool_use", 18), messageStop),
		stream(messageStart(160), textStart(0), textDelta(0, "It is "), textDelta(0, "noon UTC."), blockStop(0),
			messageDelta("end_turn", 6), messageStop),
	)
	k := mustKernel(t, `
name: claude
model:
  provider: anthropic
  name: claude-sonnet-4-5
  base_url: `+s.URL()+`
  api_key: `+testKey+`
  thinking_budget: 2048
system_prompt: You are terse.
tools: [current_time]
`, `
name: scripted
model:
  provider: scripted
  script:
    - {reasoning: "Need the clock.", text: "Let me check.", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "It is noon UTC."}
tools: [current_time]
`)
	evs := kerneltest.RunToEnd(t, k.Kernel, "claude", "What time is it?")
	aguitest.Verify(t, evs)

	assert.Equal(t, []string{
		"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", // the input
		"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
		"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
		"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"RUN_FINISHED",
	}, kerneltest.Types(evs))
	assert.JSONEq(t, `"Need the clock."`, kerneltest.Member(t, evs, session.EventReasoningMessageContent, "delta"))
	assert.JSONEq(t, `"toolu_t1"`, kerneltest.Member(t, evs, session.EventToolCallStart, "toolCallId"))
	assert.JSONEq(t, `"current_time"`, kerneltest.Member(t, evs, session.EventToolCallStart, "toolCallName"))
	assert.JSONEq(t, `[{"inputTokens":280,"outputTokens":24,"totalTokens":304,"provider":"anthropic","model":"claude-sonnet-4-5"}]`, kerneltest.Member(t, evs, session.EventRunFinished, "usage"))
	result := kerneltest.Member(t, evs, session.EventToolCallResult, "content")
	assert.Contains(t, result, "UTC")

	reqs := s.Requests()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `[{"name":"current_time","description":"Returns the current date and time in RFC 3339 format.",
		"input_schema":`+string(tools.CurrentTime{}.Definition().Parameters)+`}]`, reqs[0].Member(t, "tools"))
	assert.JSONEq(t, `[{"type":"text","text":"You are terse."}]`, reqs[0].Member(t, "system"))
	assert.JSONEq(t, `[{"role":"user","content":[{"type":"text","text":"What time is it?"}]}]`, reqs[0].Member(t, "messages"))
	assert.JSONEq(t, `[{"role":"user","content":[{"type":"text","text":"What time is it?"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"Need the clock.","signature":"`+signature+`"},
			{"type":"text","text":"Let me check."},
			{"type":"tool_use","id":"toolu_t1","name":"current_time","input":{"timezone":"UTC"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_t1","content":[{"type":"text","text":`+result+`}]}]}]`,
		reqs[1].Member(t, "messages"))
	for _, r := range reqs {
		assert.JSONEq(t, `{"type":"enabled","budget_tokens":2048}`, r.Member(t, "thinking"))
	}

	scripted := kerneltest.RunToEnd(t, k.Kernel, "scripted", "What time is it?")
	assert.Equal(t, kerneltest.Shape(scripted), kerneltest.Shape(evs), "a real provider's run has the scripted model's shape")
}

// TestKernel_RunThroughAnthropic_Error: a failed call ends the run with
// RUN_ERROR model_error and a message safe to show.
func TestKernel_RunThroughAnthropic_Error(t *testing.T) {
	s := llmtest.NewServer(t, llmtest.Status(401, nil, apiError("authentication_error", "invalid x-api-key "+testKey)))
	agent := `
name: claude
model: {provider: anthropic, name: claude-sonnet-4-5, base_url: "` + s.URL() + `", api_key: ` + testKey + `}
`
	k := mustKernel(t, agent)
	evs := kerneltest.RunToEnd(t, k.Kernel, "claude", "Hi")
	aguitest.Verify(t, evs)
	assert.JSONEq(t, `"model_error"`, kerneltest.Member(t, evs, session.EventRunError, "code"))
	assert.JSONEq(t, `"anthropic: 401 Unauthorized: invalid x-api-key [redacted]"`, kerneltest.Member(t, evs, session.EventRunError, "message"))
	assert.Len(t, s.Requests(), 1)
}

// TestKernel_ImagesReachAnthropic: the images of a run's input reach the
// server as image blocks before the text, bytes as a base64 source, a URL
// as a url source; a later run sends them again, read back from the store.
func TestKernel_ImagesReachAnthropic(t *testing.T) {
	s := llmtest.NewServer(t, textReply("A red pixel.", 10, 3), textReply("Yes.", 20, 1))
	k := mustKernel(t, `
name: claude
model: {provider: anthropic, name: claude-sonnet-4-5, base_url: `+s.URL()+`, api_key: `+testKey+`}
`)
	sess, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "claude"})
	require.NoError(t, err)
	png := imagestest.PNG()
	evs := kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "What is this?", Images: []images.Input{
		{MediaType: "image/png", Data: png}, {URL: "https://example.com/cat.jpg"}}})
	aguitest.Verify(t, evs)
	kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Sure?"})

	user := `{"role":"user","content":[
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + imagestest.Base64(png) + `"}},
		{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
		{"type":"text","text":"What is this?"}]}`
	reqs := s.Requests()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `[`+user+`]`, reqs[0].Member(t, "messages"))
	assert.JSONEq(t, `[`+user+`,{"role":"assistant","content":[{"type":"text","text":"A red pixel."}]},
		{"role":"user","content":[{"type":"text","text":"Sure?"}]}]`, reqs[1].Member(t, "messages"))
}
