package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

// testKey is the API key the tests configure; no error may show it.
const testKey = "sk-ant-test-Q1w2E3r4T5y6"

// adapter lets the checks shared with llm/openai reach this client.
var adapter = llmtest.Adapter{Name: "anthropic", APIKey: testKey, Dial: mustClient, OK: ok, Slow: slowStream}

// mustClient builds a client for the server with extra options.
func mustClient(tb testing.TB, s *llmtest.Server, opts map[string]any) llm.Provider {
	tb.Helper()
	p, err := anthropic.New(llm.ModelConfig{Provider: "anthropic", Name: "claude-sonnet-4-5", BaseURL: s.URL(), APIKey: testKey, Options: opts})
	require.NoError(tb, err)
	return p
}

// stream replies 200 with the events as SSE, in the Messages API's
// streaming format, flushing after each. Each event is its JSON data; the
// SSE event name is its "type".
func stream(events ...string) llmtest.Reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		for _, ev := range events {
			writeEvent(w, ev)
		}
	}
}

// unnamed is stream without the "event:" lines, as a proxy that keeps only
// the data lines sends it.
func unnamed(events ...string) llmtest.Reply {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
			w.(http.Flusher).Flush()
		}
	}
}

// eventType finds an event's type in its data, even in malformed data.
var eventType = regexp.MustCompile(`^\{"type": ?"([a-z_]+)"`)

func writeEvent(w http.ResponseWriter, data string) {
	name := ""
	if m := eventType.FindStringSubmatch(data); m != nil {
		name = m[1]
	}
	_, _ = io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n")
	w.(http.Flusher).Flush()
}

// textReply is a complete stream answering text.
func textReply(text string, in, out int) llmtest.Reply {
	return stream(messageStart(in), textStart(0), ping, textDelta(0, text), blockStop(0), messageDelta("end_turn", out), messageStop)
}

// ok is a complete, successful stream.
var ok = textReply("Hello", 3, 1)

// slowStream streams a token every 20ms until the client leaves, then
// closes closed.
func slowStream(closed chan<- struct{}) llmtest.Reply {
	return llmtest.Trickle(closed, writeEvent, textDelta(0, "tok "), messageStart(3), textStart(0))
}

// apiError is the body of an error response or error event.
func apiError(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CTest"}`, typ, msg)
}

// The events below are what the Messages API streams, field for field.

func messageStart(inputTokens int) string {
	return fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01Test","type":"message","role":"assistant",`+
		`"content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":`+
		`{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`,
		inputTokens)
}

const ping = `{"type": "ping"}`

func textStart(i int) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i)
}

func textDelta(i int, s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, jsonString(s))
}

func toolStart(i int, id, name string) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`,
		i, id, name)
}

func inputDelta(i int, partial string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`,
		i, jsonString(partial))
}

func thinkingStart(i int) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i)
}

func thinkingDelta(i int, s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, i, jsonString(s))
}

func signatureDelta(i int, sig string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%q}}`, i, sig)
}

func blockStop(i int) string {
	return fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)
}

func messageDelta(stopReason string, outputTokens int) string {
	return fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`,
		stopReason, outputTokens)
}

const messageStop = `{"type":"message_stop"}`

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
