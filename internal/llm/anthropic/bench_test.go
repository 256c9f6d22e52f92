package anthropic_test

import (
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

// BenchmarkClient_Stream streams one message of llmtest.BenchTokens text
// deltas, in the Messages API's event format, from a local server.
func BenchmarkClient_Stream(b *testing.B) {
	var body strings.Builder
	events := []string{messageStart(25), textStart(0), ping}
	for _, w := range llmtest.BenchWords() {
		events = append(events, textDelta(0, w))
	}
	for _, ev := range append(events, blockStop(0), messageDelta("end_turn", llmtest.BenchTokens), messageStop) {
		name := eventType.FindStringSubmatch(ev)[1]
		body.WriteString("event: " + name + "\ndata: " + ev + "\n\n")
	}
	adapter.BenchStream(b, "text/event-stream; charset=utf-8", []byte(body.String()))
}
