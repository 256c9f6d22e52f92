package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
	"github.com/kerneld/kerneld/internal/llm/openai"
)

// testKey is the API key the tests configure; no error may show it.
const testKey = "sk-test-Z9y8X7w6V5u4"

// adapter lets the checks shared with llm/anthropic reach this client.
var adapter = llmtest.Adapter{Name: "openai", APIKey: testKey, Dial: mustClient, OK: ok, Slow: slowStream}

// baseURL is what an agent's base_url would say for the server.
func baseURL(s *llmtest.Server) string { return s.URL() + "/v1" }

// mustClient builds a client for the server with extra options.
func mustClient(tb testing.TB, s *llmtest.Server, opts map[string]any) llm.Provider {
	tb.Helper()
	p, err := openai.New(llm.ModelConfig{Provider: "openai", Name: "gpt-4o-mini", BaseURL: baseURL(s), APIKey: testKey, Options: opts})
	require.NoError(tb, err)
	return p
}

// stream replies 200 with the events as SSE, in OpenAI's Chat Completions
// streaming format, flushing after each: a JSON object or [DONE] becomes a
// data line, and text starting with ':' a comment line, as
// OpenAI-compatible proxies send keep-alives.
func stream(events ...string) llmtest.Reply { return streamAs("text/event-stream", events...) }

// streamAs is stream with another Content-Type, as some servers label
// their streams.
func streamAs(contentType string, events ...string) llmtest.Reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		for _, ev := range events {
			writeEvent(w, ev)
		}
	}
}

// named is stream with an "event:" line before each data line, as some
// compatible servers and proxies send.
func named(name string, events ...string) llmtest.Reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, _ = io.WriteString(w, "event: "+name+"\n")
			writeEvent(w, ev)
		}
	}
}

func writeEvent(w http.ResponseWriter, ev string) {
	if strings.HasPrefix(ev, ":") {
		_, _ = io.WriteString(w, ev+"\n\n")
	} else {
		_, _ = io.WriteString(w, "data: "+ev+"\n\n")
	}
	w.(http.Flusher).Flush()
}

// ok is a complete, successful stream.
var ok = stream(roleChunk(), textChunk("Hello"), finishChunk("stop"), usageChunk(3, 1), done)

// slowStream streams a token every 20ms until the client leaves, then
// closes closed.
func slowStream(closed chan<- struct{}) llmtest.Reply {
	return llmtest.Trickle(closed, writeEvent, textChunk("tok "), roleChunk())
}

// The chat.completion.chunk objects below are what OpenAI streams, field
// for field.
const chunkHead = `{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1732000000,` +
	`"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[`

// chunk is a chunk of choice 0 with a delta and a finish_reason ("": null).
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return chunkHead + `{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}`
}

// roleChunk opens the assistant message, as OpenAI's first chunk does.
func roleChunk() string { return chunk(`{"role":"assistant","content":"","refusal":null}`, "") }

func textChunk(s string) string { return chunk(`{"content":`+jsonString(s)+`}`, "") }

func finishChunk(reason string) string { return chunk(`{}`, reason) }

// usageChunk is the last chunk with stream_options.include_usage.
func usageChunk(in, out int) string {
	return chunkHead + fmt.Sprintf(`],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":`+
		`{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		in, out, in+out)
}

// callStart is the first piece of tool call index: id, type and name.
func callStart(index int, id, name string) string {
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`,
		index, id, name), "")
}

// callArgs is a later piece of tool call index: an arguments fragment.
func callArgs(index int, fragment string) string {
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, index, jsonString(fragment)), "")
}

const done = "[DONE]"

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
