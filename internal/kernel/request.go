package kernel

import (
	"context"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools"
)

// prepare loads what every model call of the run needs: the model
// settings, the history window and the agent's tool definitions.
func (r *runner) prepare(ctx context.Context) error {
	if err := r.loadHistory(ctx); err != nil {
		return err
	}
	for _, ref := range r.spec.Tools {
		t, ok := r.k.tool(r, ref.Name)
		if !ok {
			continue // an MCP tool, offered by prepareMCP if its server runs
		}
		d := t.Definition()
		r.tools = append(r.tools, llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
	}
	r.tools = append(r.tools, clientToolDefinitions(r.run.ClientTools)...)
	r.mcpTools, r.mcpDown = make(map[string]tools.Tool), make(map[string]error)
	if err := r.prepareMCP(ctx); err != nil {
		return err
	}
	return r.prepareSessionMCP(ctx)
}

// request builds the model request for call n of the run: the system
// prompt with the session's memory, and the history window.
func (r *runner) request(ctx context.Context, n int) (llm.Request, error) {
	mem, err := r.k.store.ListMemory(ctx, r.run.SessionID)
	if err != nil {
		return llm.Request{}, fmt.Errorf("load memory: %w", err)
	}
	// Read at every call, so instructions changed mid-run apply from the
	// next model call on.
	s, err := r.k.store.GetSession(ctx, r.run.SessionID)
	if err != nil {
		return llm.Request{}, fmt.Errorf("load session: %w", err)
	}
	r.cutWindow()
	system := withInstructions(r.spec.SystemPrompt, s.Instructions)
	return llm.Request{
		Model:           r.settings.Model,
		System:          withContext(systemPrompt(system, mem), r.run.Context),
		Messages:        named(r.modelView(), r.spec.Name, r.run.Agent != ""),
		Tools:           r.tools,
		Temperature:     r.settings.Temperature,
		MaxTokens:       r.settings.MaxTokens,
		ReasoningEffort: r.settings.ReasoningEffort,
		RunInput:        r.run.Input,
		Turn:            n,
	}, nil
}

// window keeps the last max messages, starting at a user message when the
// window holds one, so the model never sees a tool result without its call.
// The history loaded at run start is already cut to max, so the start is
// fixed up even when nothing more is cut here.
func window(msgs []llm.Message, max int) []llm.Message {
	if max > 0 && len(msgs) > max {
		msgs = msgs[len(msgs)-max:]
	}
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			return msgs[i:]
		}
	}
	for len(msgs) > 0 && msgs[0].Role == llm.RoleTool {
		msgs = msgs[1:]
	}
	return msgs
}

// systemPrompt appends the session's memory to the agent's prompt: memory
// is context injected into every run.
func systemPrompt(base string, mem []session.MemoryEntry) string {
	lines := make([]string, len(mem))
	for i, e := range mem {
		lines[i] = fmt.Sprintf("%s: %s", e.Key, e.Value)
	}
	return withSection(base, "Session memory (JSON values kept across runs; change them with memory_set):", lines)
}

// withSection appends a heading and a list of lines to a system prompt;
// without lines it returns the prompt as it is.
func withSection(base, heading string, lines []string) string {
	if len(lines) == 0 {
		return base
	}
	var b strings.Builder
	if base = strings.TrimRight(base, "\n"); base != "" {
		b.WriteString(base)
		b.WriteString("\n\n") // one blank line between sections
	}
	b.WriteString(heading)
	b.WriteString("\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	return b.String()
}

// toLLM converts a stored message to what a provider sees.
func toLLM(m session.Message) llm.Message {
	out := llm.Message{Role: llm.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, IsError: m.IsError, Name: m.Agent}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return out
}

// MaxInstructionsBytes bounds a session's instructions.
const MaxInstructionsBytes = 16 << 10

// validateInstructions checks a session's instructions against the bound.
func validateInstructions(s string) error {
	if len(s) > MaxInstructionsBytes {
		return errdefs.Invalid("instructions", fmt.Sprintf("longer than %d bytes", MaxInstructionsBytes))
	}
	return nil
}

// withInstructions appends the session's instructions to the agent's
// system prompt.
// SessionSystemPrompt is the system prompt every model call of session s
// starts from: its agent's, with the session's own instructions (memory
// and a run's context are added per call).
func SessionSystemPrompt(spec agents.Spec, s session.Session) string {
	return withInstructions(spec.SystemPrompt, s.Instructions)
}

func withInstructions(system, instructions string) string {
	if strings.TrimSpace(instructions) == "" {
		return system
	}
	if system = strings.TrimRight(system, "\n"); system == "" {
		return instructions
	}
	return system + "\n\nInstructions for this session:\n" + instructions
}

// withContext appends the context a client gave the run to its system
// prompt, one entry a line.
func withContext(system string, entries []session.ContextEntry) string {
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = e.Description + ": " + e.Value
	}
	return withSection(system, "Context from the client for this run:", lines)
}
