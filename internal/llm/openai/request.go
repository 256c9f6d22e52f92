package openai

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/kerneld/kerneld/internal/llm"
)

// The request body of a streamed chat completion: the members kerneld
// sends, as the Chat Completions API names them.
type (
	chatRequest struct {
		Model    string        `json:"model"`
		Messages []chatMessage `json:"messages"`
		// Tools is left out when empty: OpenAI rejects an empty list.
		Tools               []chatTool `json:"tools,omitempty"`
		Temperature         *float64   `json:"temperature,omitempty"`
		MaxTokens           int        `json:"max_tokens,omitempty"`
		MaxCompletionTokens int        `json:"max_completion_tokens,omitempty"`
		// ReasoningEffort is left out unless a run chose one: models
		// without reasoning reject it.
		ReasoningEffort string        `json:"reasoning_effort,omitempty"`
		Stream          bool          `json:"stream"`
		StreamOptions   streamOptions `json:"stream_options"`
	}
	// streamOptions asks for the usage, in a last chunk without choices.
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	chatMessage struct {
		Role string `json:"role"`
		// Content is a *string, or the []contentPart of a user message
		// with images. It is nil only for an assistant message that just
		// calls tools, which OpenAI sends without content.
		Content    any            `json:"content,omitempty"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
		// Name is the agent that wrote an assistant message, when several
		// take turns on one conversation.
		Name string `json:"name,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"` // "function"
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"` // JSON text
	}
	chatTool struct {
		Type     string       `json:"type"` // "function"
		Function toolFunction `json:"function"`
	}
	toolFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

// body returns the JSON body of req's streamed chat completion: the
// system prompt first, then the history, the tools, and the sampling
// settings, asking for usage in the stream's last chunk.
func (c *Client) body(req llm.Request) ([]byte, error) {
	tools, err := chatTools(req.Tools)
	if err != nil {
		return nil, err
	}
	r := chatRequest{
		Model:           c.modelFor(req),
		Messages:        messages(req),
		Tools:           tools,
		Temperature:     cmp.Or(req.Temperature, c.temperature),
		ReasoningEffort: req.ReasoningEffort,
		Stream:          true,
		StreamOptions:   streamOptions{IncludeUsage: true},
	}
	if n := cmp.Or(req.MaxTokens, c.maxTokens); n > 0 {
		if c.compatible {
			r.MaxTokens = n
		} else {
			r.MaxCompletionTokens = n
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, errorf("encode request: %w", err) // cannot happen: its raw members are checked JSON objects
	}
	return b, nil
}

// messages maps the system prompt and the history.
func messages(req llm.Request) []chatMessage {
	out := make([]chatMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, chatMessage{Role: "system", Content: &req.System})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case llm.RoleAssistant:
			out = append(out, assistantMessage(m))
		case llm.RoleTool:
			// Chat Completions has no error flag on a tool result; the
			// kernel's error results already say "error: ...".
			out = append(out, chatMessage{Role: "tool", Content: &m.Content, ToolCallID: m.ToolCallID})
		default:
			out = append(out, userMessage(m))
		}
	}
	return out
}

// assistantMessage maps an assistant message with its tool calls. Content
// is left out when the message only calls tools, as OpenAI sends it.
func assistantMessage(m *llm.Message) chatMessage {
	out := chatMessage{Role: "assistant", Name: participantName(m.Name)}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		out.Content = &m.Content
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		out.ToolCalls = append(out.ToolCalls, chatToolCall{
			ID: tc.ID, Type: "function", Function: chatFunction{Name: tc.Name, Arguments: args},
		})
	}
	return out
}

// nameByte reports whether OpenAI takes c in a participant's name.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// participantName returns name as OpenAI accepts a participant's name:
// letters, digits, _ and - only, at most 64 of them.
func participantName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}

// emptySchema is the parameters of a tool that declares none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// chatTools maps tool definitions to function tools; nil for none.
func chatTools(tools []llm.Tool) ([]chatTool, error) {
	var out []chatTool
	for _, t := range tools {
		schema := emptySchema
		if len(t.Parameters) > 0 {
			if !isObject(t.Parameters) {
				return nil, errorf("tool %q: parameters are not a JSON Schema object", t.Name)
			}
			schema = t.Parameters
		}
		out = append(out, chatTool{Type: "function", Function: toolFunction{
			Name: t.Name, Description: t.Description, Parameters: schema,
		}})
	}
	return out, nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}
