package anthropic

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/kerneld/kerneld/internal/llm"
)

// continuation opens a history that does not start with a user message,
// which the Messages API requires.
const continuation = "(earlier conversation omitted)"

// params maps req to a streamed Messages request.
func (c *Client) params(req llm.Request) (anthropic.MessageNewParams, error) {
	tools, err := toolParams(req.Tools)
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	think := c.thinkingBudget > 0 && c.canThink(req.Messages)
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(cmp.Or(req.Model, c.model)),
		MaxTokens: int64(cmp.Or(req.MaxTokens, c.maxTokens)),
		Messages:  c.history(req.Messages, think),
		Tools:     tools,
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	switch t := cmp.Or(req.Temperature, c.temperature); {
	case think:
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(c.thinkingBudget))
	case t != nil:
		p.Temperature = anthropic.Float(*t)
	}
	return p, nil
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
func (c *Client) history(msgs []llm.Message, think bool) []anthropic.MessageParam {
	b := &historyBuilder{}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			b.add(anthropic.MessageParamRoleAssistant, c.assistantBlocks(m, think)...)
			b.calls = toolCallIDs(m)
		case llm.RoleTool:
			if b.calls[m.ToolCallID] {
				b.add(anthropic.MessageParamRoleUser, toolResult(m))
			}
		default:
			b.add(anthropic.MessageParamRoleUser, textBlocks(m.Content)...)
			b.calls = nil
		}
	}
	if len(b.out) == 0 || b.out[0].Role != anthropic.MessageParamRoleUser {
		first := anthropic.NewUserMessage(anthropic.NewTextBlock(continuation))
		b.out = append([]anthropic.MessageParam{first}, b.out...)
	}
	return b.out
}

// historyBuilder accumulates messages, merging same-role neighbours.
type historyBuilder struct {
	out   []anthropic.MessageParam
	calls map[string]bool // tool calls of the latest assistant message
}

func (b *historyBuilder) add(role anthropic.MessageParamRole, blocks ...anthropic.ContentBlockParamUnion) {
	if len(blocks) == 0 {
		return
	}
	if n := len(b.out); n > 0 && b.out[n-1].Role == role {
		b.out[n-1].Content = append(b.out[n-1].Content, blocks...)
		return
	}
	b.out = append(b.out, anthropic.MessageParam{Role: role, Content: blocks})
}

// assistantBlocks maps an assistant message: the thinking that led to its
// tool calls (when thinking is on and they are at hand), its text, and a
// tool_use block per call.
func (c *Client) assistantBlocks(m llm.Message, think bool) []anthropic.ContentBlockParamUnion {
	var blocks []anthropic.ContentBlockParamUnion
	if think && len(m.ToolCalls) > 0 {
		blocks, _ = c.thinking.get(m.ToolCalls[0].ID)
	}
	blocks = append(blocks, textBlocks(m.Content)...)
	for _, tc := range m.ToolCalls {
		blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
	}
	return blocks
}

// toolInput returns a call's arguments as the JSON object tool_use.input
// must be, or {} when they are not one.
func toolInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// toolResult maps a tool message. An empty result has no content block:
// the API rejects empty text blocks.
func toolResult(m llm.Message) anthropic.ContentBlockParamUnion {
	r := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.Content != "" {
		r.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
	}
	if m.IsError {
		r.IsError = anthropic.Bool(true)
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &r}
}

// textBlocks returns a text block for s, or none when s is blank.
func textBlocks(s string) []anthropic.ContentBlockParamUnion {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(s)}
}

// toolCallIDs returns the set of an assistant message's tool call ids.
func toolCallIDs(m llm.Message) map[string]bool {
	ids := make(map[string]bool, len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		ids[tc.ID] = true
	}
	return ids
}

// toolParams maps tool definitions: the JSON Schema's properties and
// required go to their fields, every other keyword along with them.
func toolParams(tools []llm.Tool) ([]anthropic.ToolUnionParam, error) {
	var out []anthropic.ToolUnionParam
	for _, t := range tools {
		var schema map[string]any
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
				return nil, errorf("tool %q: parameters are not a JSON Schema object", t.Name)
			}
		}
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"]}
		for k, v := range schema {
			switch k {
			case "type", "properties":
			case "required":
				in.Required = stringList(v)
			default:
				if in.ExtraFields == nil {
					in.ExtraFields = make(map[string]any)
				}
				in.ExtraFields[k] = v
			}
		}
		tp := &anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: tp})
	}
	return out, nil
}

// stringList returns the strings of a decoded JSON array.
func stringList(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
