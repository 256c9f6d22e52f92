package llmtest

import (
	"testing"

	"github.com/kerneld/kerneld/internal/llm"
)

// Hello is a request with one user message.
var Hello = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello"}}}

// Result is a streamed response put back together.
type Result struct {
	Chunks    []llm.Chunk // every chunk, in order
	Text      string
	Reasoning string
	Calls     []Call     // by index
	Usage     *llm.Usage // the last usage emitted; nil if none was
}

// Call is one tool call put back together from its pieces.
type Call struct{ ID, Name, Args string }

// Collect streams req through p and puts together what it emits, even when
// the call fails part way.
func Collect(tb testing.TB, p llm.Provider, req llm.Request) (Result, error) {
	tb.Helper()
	var r Result
	err := p.Stream(tb.Context(), req, func(c llm.Chunk) error {
		r.add(c)
		return nil
	})
	return r, err
}

// add takes in one chunk.
func (r *Result) add(c llm.Chunk) {
	r.Chunks = append(r.Chunks, c)
	r.Text += c.Text
	r.Reasoning += c.Reasoning
	if c.Usage != nil {
		u := *c.Usage
		r.Usage = &u
	}
	if d := c.ToolCall; d != nil {
		r.addToolCall(*d)
	}
}

// addToolCall adds a piece to the call of its index: the first id and name
// it gets stick, and argument fragments are appended.
func (r *Result) addToolCall(d llm.ToolCallDelta) {
	for len(r.Calls) <= d.Index {
		r.Calls = append(r.Calls, Call{})
	}
	c := &r.Calls[d.Index]
	if c.ID == "" {
		c.ID = d.ID
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	c.Args += d.Arguments
}

// ToolCallPieces returns the tool-call pieces as they were emitted, in
// order, for tests of how a call is split up.
func (r Result) ToolCallPieces() []llm.ToolCallDelta {
	var pieces []llm.ToolCallDelta
	for _, c := range r.Chunks {
		if c.ToolCall != nil {
			pieces = append(pieces, *c.ToolCall)
		}
	}
	return pieces
}
