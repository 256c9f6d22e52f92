package tools

import (
	"context"
	"encoding/json"
	"errors"
)

var (
	memoryGetSchema = schema(map[string]any{
		"key": map[string]any{"type": "string", "description": "the memory key"},
	}, "key")
	memorySetSchema = schema(map[string]any{
		"key":   map[string]any{"type": "string", "description": "the memory key: 1-128 characters of A-Z a-z 0-9 . _ - /"},
		"value": map[string]any{"description": "any JSON value"},
	}, "key", "value")
)

// MemoryGet reads a value from the session's memory.
type MemoryGet struct{}

// Definition implements Tool.
func (MemoryGet) Definition() Definition {
	return Definition{
		Name:        "memory_get",
		Description: "Reads the JSON value stored under a key in this session's memory.",
		Parameters:  memoryGetSchema,
		RetrySafe:   true, // it only reads
		ReadOnly:    true,
	}
}

// Call implements Tool.
func (MemoryGet) Call(ctx context.Context, call Call) (string, error) {
	var args struct {
		Key string `json:"key"`
	}
	if err := decodeArgs(call.Arguments, &args); err != nil {
		return "", err
	}
	if call.Memory == nil {
		return "", errors.New("memory is not available")
	}
	v, err := call.Memory.Get(ctx, args.Key)
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// MemorySet writes a value to the session's memory.
type MemorySet struct{}

// Definition implements Tool.
func (MemorySet) Definition() Definition {
	return Definition{
		Name:        "memory_set",
		Description: "Stores a JSON value under a key in this session's memory; it is shown to you in every later run.",
		Parameters:  memorySetSchema,
		RetrySafe:   true, // setting a key to its value again changes nothing
	}
}

// Call implements Tool.
func (MemorySet) Call(ctx context.Context, call Call) (string, error) {
	var args struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := decodeArgs(call.Arguments, &args); err != nil {
		return "", err
	}
	if len(args.Value) == 0 {
		return "", errors.New("arguments: value is required")
	}
	if call.Memory == nil {
		return "", errors.New("memory is not available")
	}
	if err := call.Memory.Set(ctx, args.Key, args.Value); err != nil {
		return "", err
	}
	return `{"ok":true}`, nil
}

// Builtins returns the built-in tools: current_time, memory_get, memory_set.
func Builtins() []Tool {
	return []Tool{CurrentTime{}, MemoryGet{}, MemorySet{}}
}
