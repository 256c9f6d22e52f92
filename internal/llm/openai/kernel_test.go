package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/images/imagestest"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/llm/openai"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/tools"
)

// mustKernel builds a real kernel whose agents are defined by the YAML
// texts agents and may use the openai provider.
func mustKernel(tb testing.TB, agents ...string) *kerneltest.Kernel {
	tb.Helper()
	return kerneltest.New(tb, kerneltest.Options{Agents: agents, Providers: map[string]llm.Factory{"openai": openai.New}})
}

// TestKernel_RunThroughOpenAI runs a real kernel against the fake server
// through a tool-call round trip, and checks that the run has the shape a
// scripted model's run with the same steps has.
func TestKernel_RunThroughOpenAI(t *testing.T) {
	s := llmtest.NewServer(t,
		stream(roleChunk(), textChunk("Let me check."), callStart(0, "call_t1", "current_time"),
			callArgs(0, `{"timezone":`), callArgs(0, `"UTC"}`), finishChunk("tool_calls"), usageChunk(120, 18), done),
		stream(roleChunk(), textChunk("It is "), textChunk("noon UTC."), finishChunk("stop"), usageChunk(160, 6), done),
	)
	k := mustKernel(t, `
name: gpt
model:
  provider: openai
  name: gpt-4o-mini
  base_url: `+baseURL(s)+`
  api_key: `+testKey+`
system_prompt: You are terse.
tools: [current_time]
`, `
name: scripted
model:
  provider: scripted
  script:
    - {text: "Let me check.", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "It is noon UTC."}
tools: [current_time]
`)
	evs := kerneltest.RunToEnd(t, k.Kernel, "gpt", "What time is it?")
	aguitest.Verify(t, evs)

	assert.Equal(t, []string{
		"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", // the input
		"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
		"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
		"RUN_FINISHED",
	}, kerneltest.Types(evs))
	assert.JSONEq(t, `"call_t1"`, kerneltest.Member(t, evs, session.EventToolCallStart, "toolCallId"))
	assert.JSONEq(t, `"current_time"`, kerneltest.Member(t, evs, session.EventToolCallStart, "toolCallName"))
	assert.JSONEq(t, `[{"inputTokens":280,"outputTokens":24,"totalTokens":304,"provider":"openai","model":"gpt-4o-mini"}]`, kerneltest.Member(t, evs, session.EventRunFinished, "usage"))
	result := kerneltest.Member(t, evs, session.EventToolCallResult, "content")
	assert.Contains(t, result, "UTC")

	reqs := s.Requests()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `[{"type":"function","function":{"name":"current_time","description":"Returns the current date and time in RFC 3339 format.",
		"parameters":`+string(tools.CurrentTime{}.Definition().Parameters)+`}}]`, reqs[0].Member(t, "tools"))
	assert.JSONEq(t, `[{"role":"system","content":"You are terse."},{"role":"user","content":"What time is it?"}]`, reqs[0].Member(t, "messages"))
	assert.JSONEq(t, `[{"role":"system","content":"You are terse."},{"role":"user","content":"What time is it?"},
		{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call_t1","type":"function",
			"function":{"name":"current_time","arguments":"{\"timezone\":\"UTC\"}"}}]},
		{"role":"tool","tool_call_id":"call_t1","content":`+result+`}]`, reqs[1].Member(t, "messages"))

	scripted := kerneltest.RunToEnd(t, k.Kernel, "scripted", "What time is it?")
	assert.Equal(t, kerneltest.Shape(scripted), kerneltest.Shape(evs),
		"a real provider's run has the scripted model's shape (deltas merged)")
}

// TestKernel_RunThroughOpenAI_Error: a failed call ends the run with
// RUN_ERROR model_error and a message safe to show.
func TestKernel_RunThroughOpenAI_Error(t *testing.T) {
	s := llmtest.NewServer(t, llmtest.Status(401, nil, `{"error":{"message":"Incorrect API key provided: `+testKey+`.","type":"invalid_request_error","code":"invalid_api_key"}}`))
	k := mustKernel(t, `
name: gpt
model: {provider: openai, name: gpt-4o-mini, base_url: "`+baseURL(s)+`", api_key: `+testKey+`}
`)
	evs := kerneltest.RunToEnd(t, k.Kernel, "gpt", "Hi")
	aguitest.Verify(t, evs)
	assert.JSONEq(t, `"model_error"`, kerneltest.Member(t, evs, session.EventRunError, "code"))
	assert.JSONEq(t, `"openai: 401 Unauthorized: Incorrect API key provided: [redacted]."`, kerneltest.Member(t, evs, session.EventRunError, "message"))
	assert.Len(t, s.Requests(), 1)
}

// TestKernel_ImagesReachOpenAI: the images of a run's input reach the
// server as image_url parts after the text, bytes as a data URL, a URL as
// it is; kept once, they are read back for every later call that sends
// the message.
func TestKernel_ImagesReachOpenAI(t *testing.T) {
	s := llmtest.NewServer(t,
		stream(roleChunk(), textChunk("A red pixel."), finishChunk("stop"), done),
		stream(roleChunk(), textChunk("Yes."), finishChunk("stop"), done),
	)
	k := mustKernel(t, `
name: gpt
model: {provider: openai, name: gpt-4o-mini, base_url: `+baseURL(s)+`, api_key: `+testKey+`}
`)
	sess, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "gpt"})
	require.NoError(t, err)
	png := imagestest.PNG()
	evs := kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "What is this?", Images: []images.Input{
		{MediaType: "image/png", Data: png}, {URL: "https://example.com/cat.jpg", MediaType: "image/jpeg"}}})
	aguitest.Verify(t, evs)
	var echo struct{ Images json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte(kerneltest.Member(t, evs, session.EventCustom, "value")), &echo))
	assert.JSONEq(t, `[{"hash":"`+session.ImageHash(png)+`","mediaType":"image/png"},{"url":"https://example.com/cat.jpg","mediaType":"image/jpeg"}]`,
		string(echo.Images), "the echo names the images")
	kerneltest.RunInSession(t, k.Kernel, sess.ID, kernel.RunRequest{Input: "Sure?"})

	user := `{"role":"user","content":[{"type":"text","text":"What is this?"},
		{"type":"image_url","image_url":{"url":"data:image/png;base64,` + imagestest.Base64(png) + `"}},
		{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}`
	reqs := s.Requests()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `[`+user+`]`, reqs[0].Member(t, "messages"))
	assert.JSONEq(t, `[`+user+`,{"role":"assistant","content":"A red pixel."},{"role":"user","content":"Sure?"}]`,
		reqs[1].Member(t, "messages"), "a later run sends the image again, read back from the store")
}
