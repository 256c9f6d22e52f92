package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/kerneld/kerneld/internal/llm"
)

// reader maps the events of one streamed message to llm chunks.
type reader struct {
	emit       func(llm.Chunk) error
	blocks     map[int64]*block // open content blocks by their index
	tools      int              // tool_use blocks so far: the next tool call's index
	usage      llm.Usage
	stopReason anthropic.StopReason
	stopped    bool // message_stop arrived

	toolIDs        []string                           // ids of the tool calls, in order
	thinkingBlocks []anthropic.ContentBlockParamUnion // signed thinking, for the next request
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

func newReader(emit func(llm.Chunk) error) *reader {
	return &reader{emit: emit, blocks: make(map[int64]*block)}
}

// event handles one stream event. Input tokens come with message_start,
// the output count with message_delta (a running total); ping events are
// skipped by the SDK.
func (r *reader) event(ev anthropic.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		r.usage.InputTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		r.usage.OutputTokens = u.OutputTokens
	case "content_block_start":
		return r.start(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		return r.delta(ev.Index, ev.Delta)
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
func (r *reader) start(i int64, cb anthropic.ContentBlockStartEventContentBlockUnion) error {
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
		if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
			b.input = raw
		}
		return r.emit(llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: b.tool, ID: cb.ID, Name: cb.Name}})
	}
	return nil
}

// delta streams a piece of an open block.
func (r *reader) delta(i int64, d anthropic.MessageStreamEventUnionDelta) error {
	b := r.blocks[i]
	if b == nil {
		return nil // a delta for a block that never started: nothing to add it to
	}
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
func (r *reader) stop(i int64) error {
	b := r.blocks[i]
	delete(r.blocks, i)
	switch {
	case b == nil:
	case b.kind == "thinking":
		r.thinkingBlocks = append(r.thinkingBlocks, anthropic.NewThinkingBlock(b.signature, b.thinking.String()))
	case b.kind == "redacted_thinking":
		r.thinkingBlocks = append(r.thinkingBlocks, anthropic.NewRedactedThinkingBlock(b.data))
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
	if r.stopReason == anthropic.StopReasonRefusal {
		return &llm.ResponseError{Provider: providerName, Problem: "the model declined to answer (stop_reason refusal)"}
	}
	return nil
}
