package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/kerneld/kerneld/internal/llm"
)

// event is an event of the Messages stream, reduced to the members
// kerneld reads. Which are set depends on its type.
type event struct {
	Type  string `json:"type"`
	Index int    `json:"index"` // content_block_*: the block's index
	// Message is message_start's: the input token counts.
	Message struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	ContentBlock contentBlockStart `json:"content_block"`
	// Delta is content_block_delta's piece of a block, or message_delta's
	// stop reason.
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage usage `json:"usage"` // message_delta: the output tokens so far
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// contentBlockStart is the block a content_block_start opens.
type contentBlockStart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`    // tool_use
	Name      string          `json:"name"`  // tool_use
	Input     json.RawMessage `json:"input"` // tool_use: {} when it streams
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"` // redacted_thinking
}

// reader maps the events of one streamed message to llm chunks.
type reader struct {
	emit        func(llm.Chunk) error
	streamError func(data []byte) error // maps an error event
	blocks      map[int]*block          // open content blocks by their index
	tools       int                     // tool_use blocks so far: the next tool call's index
	usage       llm.Usage
	stopReason  string
	stopped     bool  // message_stop arrived
	ev          event // the event being decoded, reused
	json        llm.JSONDecoder

	toolIDs        []string       // ids of the tool calls, in order
	thinkingBlocks []contentBlock // signed thinking, for the next request
}

// block is an open content block.
type block struct {
	kind      string // text, tool_use, thinking, redacted_thinking; others are ignored
	tool      int    // tool_use: the call's index
	input     string // tool_use: the input sent whole with the start, if any
	streamed  bool   // tool_use: input_json_delta arrived
	thinking  strings.Builder
	signature string
	data      string // redacted_thinking
}

func newReader(emit func(llm.Chunk) error, streamError func([]byte) error) *reader {
	return &reader{emit: emit, streamError: streamError, blocks: make(map[int]*block)}
}

// event handles one event of the stream; message_stop is the last one
// read. An error event fails the attempt; ping events are skipped.
func (r *reader) event(sse llm.SSEEvent) (bool, error) {
	switch {
	case sse.Name == "error":
		return false, r.streamError(sse.Data)
	case sse.Name == "ping" || len(sse.Data) == 0:
		return false, nil
	}
	r.ev = event{}
	if err := r.json.Decode(sse.Data, &r.ev); err != nil {
		return false, llm.TransportError(providerName, err)
	}
	if r.ev.Type == "error" {
		return false, r.streamError(sse.Data)
	}
	return r.ev.Type == "message_stop", r.handle(&r.ev)
}

// handle maps one event. Input tokens come with message_start, the output
// count with message_delta (a running total).
func (r *reader) handle(ev *event) error {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		r.usage.InputTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		r.usage.OutputTokens = u.OutputTokens
	case "content_block_start":
		return r.start(ev.Index, &ev.ContentBlock)
	case "content_block_delta":
		return r.delta(ev.Index, ev)
	case "content_block_stop":
		return r.stop(ev.Index)
	case "message_delta":
		r.stopReason = ev.Delta.StopReason
		r.usage.OutputTokens = max(r.usage.OutputTokens, ev.Usage.OutputTokens)
	case "message_stop":
		r.stopped = true
	}
	return nil
}

// start opens a content block. A tool_use block starts a tool call; its
// index counts the tool_use blocks of the message from 0.
func (r *reader) start(i int, cb *contentBlockStart) error {
	b := &block{kind: cb.Type, signature: cb.Signature, data: cb.Data}
	r.blocks[i] = b
	switch cb.Type {
	case "text":
		return r.text(cb.Text)
	case "thinking":
		return r.reasoning(b, cb.Thinking)
	case "tool_use":
		b.tool = r.tools
		r.tools++
		r.toolIDs = append(r.toolIDs, cb.ID)
		if raw := string(cb.Input); raw != "" && raw != "{}" && raw != "null" {
			b.input = raw
		}
		return r.emit(llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: b.tool, ID: cb.ID, Name: cb.Name}})
	}
	return nil
}

// delta streams a piece of an open block.
func (r *reader) delta(i int, ev *event) error {
	b := r.blocks[i]
	if b == nil {
		return nil // a delta for a block that never started: nothing to add it to
	}
	d := &ev.Delta
	switch d.Type {
	case "text_delta":
		return r.text(d.Text)
	case "thinking_delta":
		return r.reasoning(b, d.Thinking)
	case "signature_delta":
		b.signature += d.Signature
	case "input_json_delta":
		if b.kind != "tool_use" || d.PartialJSON == "" {
			return nil
		}
		b.streamed = true
		return r.emit(llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: b.tool, Arguments: d.PartialJSON}})
	}
	return nil
}

// stop closes a block: thinking is kept for the next request, and a tool
// call whose input came whole with its start (no deltas) gets it now.
func (r *reader) stop(i int) error {
	b := r.blocks[i]
	delete(r.blocks, i)
	switch {
	case b == nil:
	case b.kind == "thinking":
		r.thinkingBlocks = append(r.thinkingBlocks,
			thinkingBlock{Type: "thinking", Thinking: b.thinking.String(), Signature: b.signature})
	case b.kind == "redacted_thinking":
		r.thinkingBlocks = append(r.thinkingBlocks, redactedThinkingBlock{Type: "redacted_thinking", Data: b.data})
	case b.kind == "tool_use" && !b.streamed && json.Valid([]byte(b.input)):
		return r.emit(llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: b.tool, Arguments: b.input}})
	}
	return nil
}

func (r *reader) text(s string) error {
	if s == "" {
		return nil
	}
	return r.emit(llm.Chunk{Text: s})
}

func (r *reader) reasoning(b *block, s string) error {
	if s == "" {
		return nil
	}
	b.thinking.WriteString(s)
	return r.emit(llm.Chunk{Reasoning: s})
}

// end checks how the message ended and emits its usage. A stream cut off
// before message_stop is an incomplete response; a refusal is an error,
// while max_tokens is just a short answer.
func (r *reader) end() error {
	if !r.stopped {
		return &llm.ConnectionError{Provider: providerName, Err: llm.ErrIncomplete}
	}
	usage := r.usage
	if err := r.emit(llm.Chunk{Usage: &usage}); err != nil {
		return err
	}
	if r.stopReason == "refusal" {
		return &llm.ResponseError{Provider: providerName, Problem: "the model declined to answer (stop_reason refusal)"}
	}
	return nil
}
