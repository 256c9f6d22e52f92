package openai

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/kerneld/kerneld/internal/llm"
)

// params maps req to a streamed chat completion request: the system prompt
// first, then the history, the tools, and the sampling settings, asking
// for usage in the stream's last chunk.
func (c *Client) params(req llm.Request) (openai.ChatCompletionNewParams, error) {
	tools, err := toolParams(req.Tools)
	if err != nil {
		return openai.ChatCompletionNewParams{}, err
	}
	p := openai.ChatCompletionNewParams{
		Model:         c.modelFor(req),
		Messages:      messages(req),
		Tools:         tools,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if t := cmp.Or(req.Temperature, c.temperature); t != nil {
		p.Temperature = openai.Float(*t)
	}
	if n := cmp.Or(req.MaxTokens, c.maxTokens); n > 0 {
		if c.compatible {
			p.MaxTokens = openai.Int(int64(n))
		} else {
			p.MaxCompletionTokens = openai.Int(int64(n))
		}
	}
	return p, nil
}

// messages maps the system prompt and the history.
func messages(req llm.Request) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleAssistant:
			out = append(out, assistantMessage(m))
		case llm.RoleTool:
			// Chat Completions has no error flag on a tool result; the
			// kernel's error results already say "error: ...".
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		default:
			out = append(out, openai.UserMessage(m.Content))
		}
	}
	return out
}

// assistantMessage maps an assistant message with its tool calls. Content
// is left out when the message only calls tools, as OpenAI sends it.
func assistantMessage(m llm.Message) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = openai.String(m.Content)
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// toolParams maps tool definitions to function tools; nil for none, since
// OpenAI rejects an empty tools list.
func toolParams(tools []llm.Tool) ([]openai.ChatCompletionToolUnionParam, error) {
	var out []openai.ChatCompletionToolUnionParam
	for _, t := range tools {
		schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(t.Parameters) > 0 {
			schema = nil
			if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
				return nil, errorf("tool %q: parameters are not a JSON Schema object", t.Name)
			}
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out, nil
}
