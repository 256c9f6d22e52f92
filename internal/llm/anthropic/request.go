package anthropic

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/kerneld/kerneld/internal/llm"
)

// continuation opens a history that does not start with a user message,
// which the Messages API requires.
const continuation = "(earlier conversation omitted)"

// The request body of a streamed message: the members kerneld sends, as
// the Messages API names them.
type (
	messagesRequest struct {
		Model       string          `json:"model"`
		MaxTokens   int             `json:"max_tokens"`
		System      []textBlock     `json:"system,omitempty"`
		Messages    []message       `json:"messages"`
		Tools       []tool          `json:"tools,omitempty"`
		Temperature *float64        `json:"temperature,omitempty"`
		Thinking    *thinkingConfig `json:"thinking,omitempty"`
		Stream      bool            `json:"stream"`
	}
	message struct {
		Role    string         `json:"role"` // user or assistant
		Content []contentBlock `json:"content"`
	}
	tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	thinkingConfig struct {
		Type         string `json:"type"` // "enabled"
		BudgetTokens int    `json:"budget_tokens"`
	}
)

// effortBudgets map a run's reasoning_effort to the thinking budget it
// asks for; 1024 is the API's least.
var effortBudgets = map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}

// contentBlock is one block of a message's content: a textBlock,
// imageBlock, toolUseBlock, toolResultBlock, thinkingBlock or
// redactedThinkingBlock.
type contentBlock any

type (
	textBlock struct {
		Type string `json:"type"` // "text"
		Text string `json:"text"`
	}
	toolUseBlock struct {
		Type  string          `json:"type"` // "tool_use"
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"` // a JSON object
	}
	toolResultBlock struct {
		Type      string `json:"type"` // "tool_result"
		ToolUseID string `json:"tool_use_id"`
		// Content is left out for an empty result: the API rejects empty
		// text blocks.
		Content []textBlock `json:"content,omitempty"`
		IsError bool        `json:"is_error,omitempty"`
	}
	// thinkingBlock and redactedThinkingBlock go back to the API exactly
	// as it sent them; it checks the signature.
	thinkingBlock struct {
		Type      string `json:"type"` // "thinking"
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	redactedThinkingBlock struct {
		Type string `json:"type"` // "redacted_thinking"
		Data string `json:"data"`
	}
)

func newTextBlock(s string) textBlock { return textBlock{Type: "text", Text: s} }

// body returns the JSON body of req's streamed message.
func (c *Client) body(req llm.Request) ([]byte, error) {
	tools, err := toolParams(req.Tools)
	if err != nil {
		return nil, err
	}
	budget := cmp.Or(effortBudgets[req.ReasoningEffort], c.thinkingBudget)
	think := budget > 0 && c.canThink(req.Messages)
	r := messagesRequest{
		Model:     cmp.Or(req.Model, c.model),
		MaxTokens: cmp.Or(req.MaxTokens, c.maxTokens),
		Messages:  c.history(req.Messages, think),
		Tools:     tools,
		Stream:    true,
	}
	if req.System != "" {
		r.System = []textBlock{newTextBlock(req.System)}
	}
	if think {
		r.Thinking = &thinkingConfig{Type: "enabled", BudgetTokens: budget}
		if r.MaxTokens <= budget {
			// The API wants max_tokens above the budget: the answer keeps
			// the room it was given, on top of the thinking.
			r.MaxTokens += budget
		}
	} else {
		r.Temperature = cmp.Or(req.Temperature, c.temperature)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, errorf("encode request: %w", err) // cannot happen: its raw members are checked JSON objects
	}
	return b, nil
}

// canThink reports whether thinking may be enabled for this request. With
// thinking on, the API requires an assistant turn that is still calling
// tools to start with the thinking blocks it was given; when they are not
// at hand (say, the response came before a restart), the request goes
// without thinking, which the API accepts.
func (c *Client) canThink(msgs []llm.Message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch m := msgs[i]; {
		case m.Role == llm.RoleTool:
			continue
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			_, ok := c.thinking.get(m.ToolCalls[0].ID)
			return ok
		default:
			return true
		}
	}
	return true
}

// history maps the conversation to the strictly alternating user and
// assistant messages the API wants. Tool results become tool_result blocks
// of a user message, and consecutive ones share one, right after the
// assistant message that called the tools; any other run of messages with
// the same role is merged too. A tool result whose call is not in the
// preceding assistant message is dropped, since the API rejects it, and a
// history that does not start with a user message gets one.
func (c *Client) history(msgs []llm.Message, think bool) []message {
	b := &historyBuilder{}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			b.add("assistant", c.assistantBlocks(m, think)...)
			b.calls = toolCallIDs(m)
		case llm.RoleTool:
			if b.calls[m.ToolCallID] {
				b.add("user", toolResult(m))
			}
		default:
			b.add("user", userBlocks(m)...)
			b.calls = nil
		}
	}
	if len(b.out) == 0 || b.out[0].Role != "user" {
		first := message{Role: "user", Content: []contentBlock{newTextBlock(continuation)}}
		b.out = append([]message{first}, b.out...)
	}
	return b.out
}

// historyBuilder accumulates messages, merging same-role neighbours.
type historyBuilder struct {
	out   []message
	calls map[string]bool // tool calls of the latest assistant message
}

func (b *historyBuilder) add(role string, blocks ...contentBlock) {
	if len(blocks) == 0 {
		return
	}
	if n := len(b.out); n > 0 && b.out[n-1].Role == role {
		b.out[n-1].Content = append(b.out[n-1].Content, blocks...)
		return
	}
	b.out = append(b.out, message{Role: role, Content: blocks})
}

// assistantBlocks maps an assistant message: the thinking that led to its
// tool calls (when thinking is on and they are at hand), its text, and a
// tool_use block per call.
func (c *Client) assistantBlocks(m llm.Message, think bool) []contentBlock {
	var blocks []contentBlock
	if think && len(m.ToolCalls) > 0 {
		blocks, _ = c.thinking.get(m.ToolCalls[0].ID)
	}
	blocks = append(blocks, textBlocks(m.Content)...)
	for _, tc := range m.ToolCalls {
		blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
	}
	return blocks
}

// emptyObject is the input of a call without valid arguments.
var emptyObject = json.RawMessage("{}")

// toolInput returns a call's arguments as the JSON object tool_use.input
// must be, or {} when they are not one.
func toolInput(args string) json.RawMessage {
	if !isObject([]byte(args)) {
		return emptyObject
	}
	return json.RawMessage(args)
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// toolResult maps a tool message.
func toolResult(m llm.Message) contentBlock {
	r := toolResultBlock{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
	if m.Content != "" {
		r.Content = []textBlock{newTextBlock(m.Content)}
	}
	return r
}

// textBlocks returns a text block for s, or none when s is blank.
func textBlocks(s string) []contentBlock {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []contentBlock{newTextBlock(s)}
}

// toolCallIDs returns the set of an assistant message's tool call ids.
func toolCallIDs(m llm.Message) map[string]bool {
	ids := make(map[string]bool, len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		ids[tc.ID] = true
	}
	return ids
}

// toolParams maps tool definitions. input_schema is the tool's JSON Schema
// with "type": "object", which the API requires; a tool without
// parameters takes an empty object.
func toolParams(tools []llm.Tool) ([]tool, error) {
	var out []tool
	for _, t := range tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return nil, errorf("tool %q: parameters are not a JSON Schema object", t.Name)
		}
		out = append(out, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// objectType is the "type" member of every input_schema.
var objectType = json.RawMessage(`"object"`)

// inputSchema returns params, a JSON Schema object, with "type": "object".
func inputSchema(params json.RawMessage) (json.RawMessage, error) {
	schema := map[string]json.RawMessage{}
	if len(params) > 0 {
		schema = nil
		if err := json.Unmarshal(params, &schema); err != nil || schema == nil {
			return nil, errorf("not a JSON object")
		}
		if string(schema["type"]) == string(objectType) {
			return params, nil
		}
	}
	schema["type"] = objectType
	return json.Marshal(schema)
}
