package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
)

// memory is a tools.Memory over a map.
type memory struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

func (m *memory) Get(_ context.Context, key string) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[key]
	if !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, errdefs.CodeMemoryKeyNotFound, "memory key %q not found", key)
	}
	return v, nil
}

func (m *memory) Set(_ context.Context, key string, v json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[key] = v
	return nil
}

func call(t *testing.T, tool tools.Tool, args string, mem tools.Memory) (string, error) {
	t.Helper()
	return tool.Call(t.Context(), tools.Call{Arguments: json.RawMessage(args), Memory: mem})
}

func TestCurrentTime(t *testing.T) {
	fixed := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ct := tools.CurrentTime{Now: func() time.Time { return fixed }}
	tests := []struct {
		name, args, want, wantErr string
	}{
		{"default UTC", `{}`, `{"time":"2026-11-21T12:00:00Z","timezone":"UTC"}`, ""},
		{"empty arguments", ``, `{"time":"2026-11-21T12:00:00Z","timezone":"UTC"}`, ""},
		{"time zone", `{"timezone":"Europe/Paris"}`, `{"time":"2026-11-21T13:00:00+01:00","timezone":"Europe/Paris"}`, ""},
		{"unknown zone", `{"timezone":"Mars/Olympus"}`, "", `unknown timezone "Mars/Olympus"`},
		{"unknown argument", `{"tz":"UTC"}`, "", `unknown field "tz"`},
		{"not an object", `[1]`, "", "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, ct, tt.args, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestMemoryTools(t *testing.T) {
	mem := &memory{m: map[string]json.RawMessage{}}
	if out, err := call(t, tools.MemorySet{}, `{"key":"user","value":{"name":"Ada"}}`, mem); err != nil || out != `{"ok":true}` {
		t.Fatalf("memory_set = %s, %v", out, err)
	}
	if out, err := call(t, tools.MemoryGet{}, `{"key":"user"}`, mem); err != nil || out != `{"name":"Ada"}` {
		t.Fatalf("memory_get = %s, %v", out, err)
	}
	for _, tt := range []struct {
		name string
		tool tools.Tool
		args string
		mem  tools.Memory
	}{
		{"get missing key", tools.MemoryGet{}, `{"key":"nope"}`, mem},
		{"set without value", tools.MemorySet{}, `{"key":"k"}`, mem},
		{"set unknown field", tools.MemorySet{}, `{"key":"k","value":1,"ttl":3}`, mem},
		{"no memory", tools.MemoryGet{}, `{"key":"user"}`, nil},
	} {
		if _, err := call(t, tt.tool, tt.args, tt.mem); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := tools.NewRegistry(tools.Builtins()...)
	if got := strings.Join(r.Names(), ","); got != "current_time,memory_get,memory_set" {
		t.Errorf("Names = %s", got)
	}
	if !r.Has("memory_get") || r.Has("rm_rf") {
		t.Error("Has answers wrongly")
	}
	for _, name := range r.Names() {
		tool, _ := r.Get(name)
		if !tool.Definition().RetrySafe {
			t.Errorf("%s: not safe to retry; every built-in tool reads, or sets a key to a value", name)
		}
		var schema map[string]any
		if err := json.Unmarshal(tool.Definition().Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s are not an object schema", name, tool.Definition().Parameters)
		}
	}
}
