package openai

import (
	"encoding/json"

	"github.com/openai/openai-go/v3"

	"github.com/kerneld/kerneld/internal/llm"
)

// reader maps the chunks of one streamed completion to llm chunks.
type reader struct {
	emit   func(llm.Chunk) error
	calls  callIndex
	finish string     // the choice's finish_reason, once sent
	usage  *llm.Usage // the latest usage seen; emitted at the end
	chunks int        // chunks read
}

func newReader(emit func(llm.Chunk) error) *reader {
	return &reader{emit: emit, calls: callIndex{byWire: make(map[int64]int), last: -1}}
}

// chunk handles one chat.completion.chunk. Only choice 0 exists, since
// kerneld never asks for n > 1. Usage rides on its own chunk, with no
// choices, just before [DONE].
func (r *reader) chunk(c openai.ChatCompletionChunk) error {
	r.chunks++
	if c.JSON.Usage.Valid() {
		r.usage = &llm.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if err := r.delta(ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
		}
	}
	return nil
}

// empty reports whether the stream held no chunk at all.
func (r *reader) empty() bool { return r.chunks == 0 }

// delta emits what one delta carries, in the order a model produces it.
func (r *reader) delta(d openai.ChatCompletionChunkChoiceDelta) error {
	if s := reasoning(d); s != "" {
		if err := r.emit(llm.Chunk{Reasoning: s}); err != nil {
			return err
		}
	}
	for _, s := range []string{d.Content, d.Refusal} {
		if s == "" {
			continue
		}
		if err := r.emit(llm.Chunk{Text: s}); err != nil {
			return err
		}
	}
	for _, tc := range d.ToolCalls {
		piece := &llm.ToolCallDelta{
			Index: r.calls.index(tc), ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
		}
		if err := r.emit(llm.Chunk{ToolCall: piece}); err != nil {
			return err
		}
	}
	return nil
}

// end checks that the stream finished and emits the usage. A stream cut
// off before any finish_reason (a proxy dropped it) is an incomplete
// response, not a short answer.
func (r *reader) end() error {
	switch r.finish {
	case "":
		return &llm.ConnectionError{Provider: providerName, Err: llm.ErrIncomplete}
	case "content_filter":
		return &llm.ResponseError{Provider: providerName, Problem: "the response was stopped by the content filter"}
	}
	if r.usage != nil {
		return r.emit(llm.Chunk{Usage: r.usage})
	}
	return nil
}

// reasoning returns a delta's reasoning text, which OpenAI-compatible
// servers send outside the official schema: reasoning_content (DeepSeek,
// vLLM, llama.cpp) or reasoning (Ollama, OpenRouter). A server sending
// both sends the same text twice, so the first one set wins.
func reasoning(d openai.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[key]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// callIndex numbers the tool calls of one response from 0, as
// llm.ToolCallDelta.Index wants, from what servers send: OpenAI sends an
// index with every piece and the id and name with the first; some
// compatible servers omit the index, send each call whole, or reuse an
// index for a new call.
type callIndex struct {
	byWire map[int64]int // the server's index → ours
	ids    []string      // by our index: the call's id, if known
	named  []bool        // by our index: the call's name was sent
	last   int           // our index of the latest call; -1 before any
}

// index returns our index for one tool-call piece.
func (x *callIndex) index(tc openai.ChatCompletionChunkChoiceDeltaToolCall) int {
	if tc.JSON.Index.Valid() {
		i, ok := x.byWire[tc.Index]
		if !ok || x.otherID(i, tc) {
			i = x.add()
			x.byWire[tc.Index] = i
		}
		return x.note(i, tc)
	}
	// No index: a piece with another id, or with a name when the latest
	// call has one and the piece no id, is a whole new call; the rest
	// continue the latest.
	if x.last < 0 || x.otherID(x.last, tc) || (tc.ID == "" && tc.Function.Name != "" && x.named[x.last]) {
		return x.note(x.add(), tc)
	}
	return x.note(x.last, tc)
}

// otherID reports whether tc carries an id other than call i's.
func (x *callIndex) otherID(i int, tc openai.ChatCompletionChunkChoiceDeltaToolCall) bool {
	return tc.ID != "" && x.ids[i] != "" && x.ids[i] != tc.ID
}

func (x *callIndex) add() int {
	x.ids = append(x.ids, "")
	x.named = append(x.named, false)
	return len(x.ids) - 1
}

// note records what tc says about call i and makes it the latest.
func (x *callIndex) note(i int, tc openai.ChatCompletionChunkChoiceDeltaToolCall) int {
	if x.ids[i] == "" {
		x.ids[i] = tc.ID
	}
	if tc.Function.Name != "" {
		x.named[i] = true
	}
	x.last = i
	return i
}
