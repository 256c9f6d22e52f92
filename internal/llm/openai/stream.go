package openai

import (
	"bytes"
	"cmp"
	"encoding/json"

	"github.com/kerneld/kerneld/internal/llm"
)

// chunk is a chat.completion.chunk, reduced to the members kerneld reads.
type chunk struct {
	Choices []choice `json:"choices"`
	// Usage comes, with stream_options.include_usage, on a last chunk
	// without choices; null on the others.
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	// Error is set on an error a server sends inside the stream.
	Error json.RawMessage `json:"error"`
}

type choice struct {
	Index        int    `json:"index"`
	Delta        delta  `json:"delta"`
	FinishReason string `json:"finish_reason"` // null until the last chunk
}

type delta struct {
	Content string `json:"content"`
	Refusal string `json:"refusal"`
	// Reasoning text, which OpenAI-compatible servers send outside the
	// official schema: reasoning_content (DeepSeek, vLLM, llama.cpp) or
	// reasoning (Ollama, OpenRouter).
	ReasoningContent looseString    `json:"reasoning_content"`
	Reasoning        looseString    `json:"reasoning"`
	ToolCalls        []toolCallPart `json:"tool_calls"`
}

// toolCallPart is a piece of a streamed tool call.
type toolCallPart struct {
	Index    *int   `json:"index"` // absent on servers that send each call whole
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// looseString is a string member that servers outside the official schema
// send: any other JSON value reads as "", so an unexpected shape cannot
// fail a response.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	var v string
	if len(b) > 0 && b[0] == '"' && json.Unmarshal(b, &v) == nil {
		*s = looseString(v)
	}
	return nil
}

// doneData is the data of the event that ends the stream.
var doneData = []byte("[DONE]")

// reader maps the events of one streamed completion to llm chunks.
type reader struct {
	emit        func(llm.Chunk) error
	streamError func(data []byte) error // maps an error sent inside the stream
	calls       callIndex
	finish      string     // the choice's finish_reason, once sent
	usage       *llm.Usage // the latest usage seen; emitted at the end
	c           chunk      // the chunk being decoded, reused
	json        llm.JSONDecoder
}

func newReader(emit func(llm.Chunk) error, streamError func([]byte) error) *reader {
	return &reader{emit: emit, streamError: streamError, calls: callIndex{byWire: make(map[int]int), last: -1}}
}

// event handles one event of the stream: a chunk, an error, or [DONE],
// after which nothing is read.
func (r *reader) event(ev llm.SSEEvent) (bool, error) {
	data := bytes.TrimSpace(ev.Data)
	switch {
	case bytes.HasPrefix(data, doneData):
		return true, nil
	case ev.Name == "error":
		return false, r.streamError(data)
	case len(data) == 0:
		return false, nil
	}
	// Decode into the previous chunk's choices, cleared: encoding/json
	// reuses a slice's elements without zeroing them.
	choices := r.c.Choices[:cap(r.c.Choices)]
	clear(choices)
	r.c = chunk{Choices: choices[:0]}
	if err := r.json.Decode(data, &r.c); err != nil {
		if hasError(data) {
			return false, r.streamError(data)
		}
		return false, llm.TransportError(providerName, err)
	}
	if len(r.c.Error) > 0 && string(r.c.Error) != "null" {
		return false, r.streamError(data)
	}
	return false, r.chunk(&r.c)
}

// hasError reports whether data is a JSON object with an error member,
// whatever its other members hold.
func hasError(data []byte) bool {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &ev) == nil && len(ev.Error) > 0 && string(ev.Error) != "null"
}

// chunk handles one chat.completion.chunk. Only choice 0 exists, since
// kerneld never asks for n > 1.
func (r *reader) chunk(c *chunk) error {
	if u := c.Usage; u != nil {
		r.usage = &llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		if err := r.delta(&ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
		}
	}
	return nil
}

// delta emits what one delta carries, in the order a model produces it.
func (r *reader) delta(d *delta) error {
	// A server sending both reasoning members sends the same text twice,
	// so the first one set wins.
	if s := string(cmp.Or(d.ReasoningContent, d.Reasoning)); s != "" {
		if err := r.emit(llm.Chunk{Reasoning: s}); err != nil {
			return err
		}
	}
	for _, s := range [...]string{d.Content, d.Refusal} {
		if s == "" {
			continue
		}
		if err := r.emit(llm.Chunk{Text: s}); err != nil {
			return err
		}
	}
	for i := range d.ToolCalls {
		tc := &d.ToolCalls[i]
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

// callIndex numbers the tool calls of one response from 0, as
// llm.ToolCallDelta.Index wants, from what servers send: OpenAI sends an
// index with every piece and the id and name with the first; some
// compatible servers omit the index, send each call whole, or reuse an
// index for a new call.
type callIndex struct {
	byWire map[int]int // the server's index → ours
	ids    []string    // by our index: the call's id, if known
	named  []bool      // by our index: the call's name was sent
	last   int         // our index of the latest call; -1 before any
}

// index returns our index for one tool-call piece.
func (x *callIndex) index(tc *toolCallPart) int {
	if tc.Index != nil {
		i, ok := x.byWire[*tc.Index]
		if !ok || x.otherID(i, tc) {
			i = x.add()
			x.byWire[*tc.Index] = i
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
func (x *callIndex) otherID(i int, tc *toolCallPart) bool {
	return tc.ID != "" && x.ids[i] != "" && x.ids[i] != tc.ID
}

func (x *callIndex) add() int {
	x.ids = append(x.ids, "")
	x.named = append(x.named, false)
	return len(x.ids) - 1
}

// note records what tc says about call i and makes it the latest.
func (x *callIndex) note(i int, tc *toolCallPart) int {
	if x.ids[i] == "" {
		x.ids[i] = tc.ID
	}
	if tc.Function.Name != "" {
		x.named[i] = true
	}
	x.last = i
	return i
}
