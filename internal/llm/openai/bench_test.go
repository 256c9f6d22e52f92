package openai_test

import (
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/llm/llmtest"
)

// BenchmarkClient_Stream streams one completion of llmtest.BenchTokens
// text tokens, in OpenAI's chunk format, from a local server.
func BenchmarkClient_Stream(b *testing.B) {
	var body strings.Builder
	events := []string{roleChunk()}
	for _, w := range llmtest.BenchWords() {
		events = append(events, textChunk(w))
	}
	for _, ev := range append(events, finishChunk("stop"), usageChunk(25, llmtest.BenchTokens), done) {
		body.WriteString("data: " + ev + "\n\n")
	}
	adapter.BenchStream(b, "text/event-stream", []byte(body.String()))
}
