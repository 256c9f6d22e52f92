// Package tools defines what a tool is (the Tool interface), the Registry
// of tools kerneld knows, and the built-in tools.
//
// A tool never fails a run: its error goes back to the model as an error
// result. Which tools an agent may call is the agent file's business.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Definition describes a tool to a model, and to the kernel how it may
// call it.
type Definition struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments object
	// RetrySafe says that calling the tool again with the same arguments
	// does nothing a first call did not: it only reads, or it sets
	// something to a value. When a process dies in the middle of such a
	// call, the run that continues makes it again; any other cut call gets
	// an error result saying it may or may not have taken effect. An
	// agent's tools.<name>.retry overrides it.
	RetrySafe bool
	// ReadOnly says that the tool only reads: a session in permission
	// mode read_only_auto calls it without asking a person even where the
	// agent requires approval. MCP tools say so with readOnlyHint.
	ReadOnly bool
}

// Memory is the calling session's key/value memory.
type Memory interface {
	// Get returns the value under key or an error wrapping errdefs.ErrNotFound.
	Get(ctx context.Context, key string) (json.RawMessage, error)
	Set(ctx context.Context, key string, value json.RawMessage) error
}

// Call is one invocation of a tool by a model.
type Call struct {
	SessionID  string
	RunID      string
	ToolCallID string
	Arguments  json.RawMessage // the model's arguments, a JSON object
	Memory     Memory
}

// Tool is something a model can call.
type Tool interface {
	Definition() Definition
	// Call runs the tool. The string is the result the model sees; an error
	// is shown to the model as a failed call.
	Call(ctx context.Context, call Call) (string, error)
}

// Registry is the set of tools kerneld knows, by name.
type Registry struct {
	tools map[string]Tool
}

// NewRegistry returns a registry of ts. A later tool replaces an earlier
// one with the same name.
func NewRegistry(ts ...Tool) *Registry {
	r := &Registry{tools: make(map[string]Tool, len(ts))}
	for _, t := range ts {
		r.tools[t.Definition().Name] = t
	}
	return r
}

// Get returns the named tool.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the registered tool names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether a tool is registered under name.
func (r *Registry) Has(name string) bool {
	_, ok := r.tools[name]
	return ok
}

// decodeArgs strictly decodes a model's arguments into v. Models send
// arguments as a JSON object; an empty string counts as {}.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

// schema returns a JSON Schema object with the given properties and
// required names; props maps a name to its schema.
func schema(props map[string]any, required ...string) json.RawMessage {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = slices.Clone(required)
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // only called with literal maps at init
	}
	return b
}
