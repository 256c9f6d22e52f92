// Package llm is the provider-neutral vocabulary between the kernel and
// model adapters: Request, Message, Chunk and the Provider interface every
// adapter (llm/openai, llm/anthropic, llm/scripted) implements, plus what
// the network adapters share: the retry and timeout policy of a call, its
// HTTP exchange and the reading of its server-sent event stream, the
// classification and cleaning of provider errors, and the decoding and
// checking of the model block.
//
// Adapters own their wire formats: the request bodies they send and the
// events they read. The HTTP exchange of an attempt (Endpoint) is shared,
// so both send, cancel and classify failures the same way.
package llm

import (
	"context"
	"encoding/json"
	"time"
)

// Role is who a message is from.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Message is one history entry sent to a model. The system prompt travels
// in Request.System, not as a message.
type Message struct {
	Role       Role
	Content    string
	Images     []Image    // RoleUser: pictures sent with the text, in order
	ToolCalls  []ToolCall // RoleAssistant
	ToolCallID string     // RoleTool: the call this answers
	IsError    bool       // RoleTool: the tool failed
	// Name is the agent that wrote an assistant message, set when several
	// agents take turns on one conversation; adapters whose vendor has a
	// field for it send it (OpenAI's name).
	Name string
}

// Image is a picture in a user message: its bytes with their media type
// (image/png, image/jpeg, image/gif or image/webp), or a URL the vendor
// fetches itself. Exactly one of Data and URL is set. Each adapter sends
// it in its vendor's own form; the caller has checked the bytes are the
// media type they claim.
type Image struct {
	MediaType string
	Data      []byte
	URL       string
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments object
}

// Request is one model call.
type Request struct {
	Model       string
	System      string
	Messages    []Message
	Tools       []Tool
	Temperature *float64
	MaxTokens   int
	// ReasoningEffort, when set, is how hard the model should think:
	// minimal, low, medium or high. Each adapter maps it to its own
	// parameter (OpenAI reasoning_effort, Anthropic's thinking budget).
	ReasoningEffort string
	// Purpose is PurposeSummary for a call that summarises the history
	// for compaction; "" for a turn of the run. Real models ignore it; the
	// scripted model answers a summary call with its summary option.
	Purpose string
	// RunInput is the input that started the run and Turn the 0-based index
	// of this call within the run. Real models ignore both; the scripted
	// model uses them to pick its step and fill {input}.
	RunInput string
	Turn     int
}

// Purposes of a Request that is not a turn of a run.
const (
	// PurposeSummary marks a Request that asks for a compaction summary.
	PurposeSummary = "summary"
	// PurposeTitle marks a Request that asks for a session's title.
	PurposeTitle = "title"
)

// ToolCallDelta is a piece of a streamed tool call. Index identifies the
// call within the response; ID and Name arrive with its first piece.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string // a fragment of the JSON arguments
}

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Chunk is one piece of a streamed completion. Exactly one field is set.
type Chunk struct {
	Text      string         // assistant text delta
	Reasoning string         // reasoning ("thinking") delta
	ToolCall  *ToolCallDelta // a piece of a tool call
	Usage     *Usage         // token counts of the whole call; a later one replaces an earlier one
}

// Provider streams one model completion. Each vendor adapter implements it.
type Provider interface {
	// Stream sends req and calls emit for every chunk, in order. It returns
	// when the completion ends, when emit returns an error, or when ctx ends.
	Stream(ctx context.Context, req Request, emit func(Chunk) error) error
}

// ModelConfig is the `model:` block of an agent file.
type ModelConfig struct {
	Provider    string
	Name        string
	BaseURL     string
	APIKey      string
	Temperature *float64
	MaxTokens   int
	// Options holds the provider-specific members of the block (for the
	// scripted model: script, token_delay, error, fail_after_tokens).
	Options map[string]any
}

// Factory builds a Provider for one agent's model block. It returns an error
// naming the field when the block is wrong.
type Factory func(ModelConfig) (Provider, error)

// Sleep waits for d or until ctx ends, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
