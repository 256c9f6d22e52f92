package agents_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
)

// fakeModel is what fakeFactory builds; it remembers its config so tests
// can see what the loader passed.
type fakeModel struct{ cfg llm.ModelConfig }

func (*fakeModel) Stream(context.Context, llm.Request, func(llm.Chunk) error) error { return nil }

// fakeFactory builds a fakeModel, failing when the block sets `fail`.
func fakeFactory(cfg llm.ModelConfig) (llm.Provider, error) {
	if msg, ok := cfg.Options["fail"].(string); ok {
		return nil, errors.New("fail: " + msg)
	}
	return &fakeModel{cfg: cfg}, nil
}

// builtinTools are the tool names kerneld registers out of the box.
var builtinTools = map[string]bool{"current_time": true, "memory_get": true, "memory_set": true}

// testOptions knows the fake and scripted providers, the built-in tools and
// a fixed environment.
func testOptions(env map[string]string) agents.Options {
	return agents.Options{
		Providers: map[string]llm.Factory{"fake": fakeFactory, "scripted": scripted.New},
		KnownTool: func(name string) bool { return builtinTools[name] },
		Getenv:    func(k string) string { return env[k] },
	}
}

// mustWriteDir writes files (name → content) into a new temporary directory.
func mustWriteDir(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		mustWrite(tb, filepath.Join(dir, name), content)
	}
	return dir
}

// mustWrite writes content to path, creating parent directories.
func mustWrite(tb testing.TB, path, content string) {
	tb.Helper()
	require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(tb, os.WriteFile(path, []byte(content), 0o644))
}

const helperYAML = `
name: helper
description: answers questions
model:
  provider: fake
  name: gpt-4o-mini
  base_url: ${BASE_URL}
  api_key: ${API_KEY}
  temperature: 0.2
  max_tokens: 512
  flavour: vanilla
  nested: {a: [1, 2]}
system_prompt: You are a helpful assistant.
tools:
  - current_time
  - name: memory_set
    require_approval: true
max_turns: 8
limits: {max_children: 2, max_depth: 3, run_timeout: 90s}
memory: {max_history_messages: 50}
`

func TestLoad(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"helper.yaml":      helperYAML,
		"zeta.yml":         "name: zeta\nmodel: {provider: fake}\n",
		"README.md":        "not an agent",
		".#helper.yaml":    "editor lock file: not YAML at all: [",
		"sub/nested.yaml":  "name: nested\nmodel: {provider: fake}\n",
		"anything-at.yaml": "name: alpha\nmodel: {provider: fake}\n",
	})
	r, err := agents.Load(dir, testOptions(map[string]string{"BASE_URL": "http://llm:8080/v1", "API_KEY": "sk-test"}))
	require.NoError(t, err)

	var names []string
	for _, s := range r.List() {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"alpha", "helper", "zeta"}, names, "sorted by name, from *.yaml and *.yml only")

	got, err := r.Get("helper")
	require.NoError(t, err)
	require.IsType(t, &fakeModel{}, got.Provider)
	assert.Equal(t, got.Model, got.Provider.(*fakeModel).cfg, "the factory gets the model block")
	temp := 0.2
	want := agents.Spec{
		Name:        "helper",
		Description: "answers questions",
		Model: llm.ModelConfig{
			Provider: "fake", Name: "gpt-4o-mini", BaseURL: "http://llm:8080/v1", APIKey: "sk-test",
			Temperature: &temp, MaxTokens: 512,
			Options: map[string]any{"flavour": "vanilla", "nested": map[string]any{"a": []any{1, 2}}},
		},
		SystemPrompt: "You are a helpful assistant.",
		Tools:        []agents.ToolRef{{Name: "current_time"}, {Name: "memory_set", RequireApproval: true}},
		MaxTurns:     8,
		Limits:       agents.Limits{MaxChildren: 2, MaxDepth: 3, RunTimeout: 90 * time.Second},
		Memory:       agents.MemoryPolicy{MaxHistoryMessages: 50},
		File:         filepath.Join(dir, "helper.yaml"),
		Provider:     got.Provider,
	}
	assert.Equal(t, want, got)
}

func TestLoad_Defaults(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"min.yaml":   "name: min\nmodel: {provider: fake}\n",
		"zero.yaml":  "name: zero\nmodel: {provider: fake}\nlimits: {max_children: 0, max_depth: 0}\n",
		"nulls.yaml": "name: nulls\nmodel: {provider: fake}\ntools:\nlimits:\nmemory:\n",
	})
	r, err := agents.Load(dir, testOptions(nil))
	require.NoError(t, err)

	for _, name := range []string{"min", "nulls"} {
		s, err := r.Get(name)
		require.NoError(t, err)
		assert.Equal(t, 16, s.MaxTurns, name)
		assert.Equal(t, agents.Limits{MaxChildren: 5, MaxDepth: 1, RunTimeout: 10 * time.Minute}, s.Limits, name)
		assert.Equal(t, agents.MemoryPolicy{MaxHistoryMessages: 200}, s.Memory, name)
		assert.Empty(t, s.Tools, name)
	}
	zero, err := r.Get("zero")
	require.NoError(t, err)
	assert.Equal(t, agents.Limits{RunTimeout: 10 * time.Minute}, zero.Limits, "an explicit 0 is kept, not defaulted")
}

func TestLoad_ExpandsEnv(t *testing.T) {
	const file = `
name: priced
model: {provider: fake, api_key: "${KEY}", base_url: "${UNSET}"}
system_prompt: "Costs $5, see $HOME or $ {KEY} and ${KEY}; $$ stays."
`
	dir := mustWriteDir(t, map[string]string{"priced.yaml": file})
	r, err := agents.Load(dir, testOptions(map[string]string{"KEY": "secret", "HOME": "/root"}))
	require.NoError(t, err)
	s, err := r.Get("priced")
	require.NoError(t, err)
	assert.Equal(t, "secret", s.Model.APIKey)
	assert.Empty(t, s.Model.BaseURL, "an unset variable expands to nothing")
	assert.Equal(t, "Costs $5, see $HOME or $ {KEY} and secret; $$ stays.", s.SystemPrompt)
}

func TestLoad_GetenvDefaultsToProcessEnv(t *testing.T) {
	t.Setenv("KERNELD_AGENTS_TEST_KEY", "from-env")
	dir := mustWriteDir(t, map[string]string{"a.yaml": "name: a\nmodel: {provider: fake, api_key: '${KERNELD_AGENTS_TEST_KEY}'}\n"})
	opts := testOptions(nil)
	opts.Getenv = nil
	r, err := agents.Load(dir, opts)
	require.NoError(t, err)
	s, err := r.Get("a")
	require.NoError(t, err)
	assert.Equal(t, "from-env", s.Model.APIKey)
}

func TestLoad_Directory(t *testing.T) {
	t.Run("Missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		_, err := agents.Load(dir, testOptions(nil))
		require.ErrorIs(t, err, fs.ErrNotExist)
		assert.Contains(t, err.Error(), dir)
	})
	t.Run("Empty", func(t *testing.T) {
		r, err := agents.Load(t.TempDir(), testOptions(nil))
		require.NoError(t, err)
		assert.Empty(t, r.List())
	})
}

func TestLoad_Rejects(t *testing.T) {
	const model = "model: {provider: fake}\n"
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"missing name", model, "name: required"},
		{"bad name", "name: a b\n" + model, `name: "a b" must be 1-64 characters`},
		{"long name", "name: " + strings.Repeat("a", 65) + "\n" + model, "name:"},
		{"missing model", "name: x\n", "model.provider: required"},
		{"missing provider", "name: x\nmodel: {name: gpt}\n", "model.provider: required"},
		{"unknown provider", "name: x\nmodel: {provider: nope}\n", `model.provider: unknown provider "nope" (known: fake, scripted)`},
		{"negative max_tokens", "name: x\nmodel: {provider: fake, max_tokens: -1}\n", "model.max_tokens: must not be negative"},
		{"mistyped temperature", "name: x\nmodel: {provider: fake, temperature: hot}\n", "model.temperature: cannot unmarshal"},
		{"factory error", "name: x\nmodel: {provider: fake, fail: boom}\n", "model: fail: boom"},
		{"scripted factory error", "name: x\nmodel: {provider: scripted}\n", "model: invalid script: required"},
		{"scripted unknown option", "name: x\nmodel: {provider: scripted, scripts: []}\n", "model: invalid scripts: unknown field"},
		{"unknown top-level field", "name: x\n" + model + "mcp_servers:\n  - name: everything\n", "mcp_servers: unknown field (line 3)"},
		{"unknown limits field", "name: x\n" + model + "limits: {max_childs: 1}\n", "limits.max_childs: unknown field"},
		{"unknown memory field", "name: x\n" + model + "memory: {max: 1}\n", "memory.max: unknown field"},
		{"unknown tool", "name: x\n" + model + "tools: [current_time, frobnicate]\n", `tools[1]: unknown tool "frobnicate"`},
		{"tool without name", "name: x\n" + model + "tools: [{require_approval: true}]\n", "tools[0].name: required"},
		{"unknown tool field", "name: x\n" + model + "tools: [{name: current_time, approve: true}]\n", "tools[0].approve: unknown field"},
		{"duplicate tool", "name: x\n" + model + "tools: [current_time, {name: current_time}]\n", `tools[1]: duplicate tool "current_time"`},
		{"tools not a list", "name: x\n" + model + "tools: current_time\n", "tools: must be a list"},
		{"zero max_turns", "name: x\n" + model + "max_turns: 0\n", "max_turns: must be between 1 and 1000, got 0"},
		{"huge max_turns", "name: x\n" + model + "max_turns: 1001\n", "max_turns: must be between 1 and 1000"},
		{"mistyped max_turns", "name: x\n" + model + "max_turns: many\n", "max_turns: cannot unmarshal !!str `many` into int (line 3)"},
		{"negative max_children", "name: x\n" + model + "limits: {max_children: -1}\n", "limits.max_children: must not be negative"},
		{"negative max_depth", "name: x\n" + model + "limits: {max_depth: -1}\n", "limits.max_depth: must not be negative"},
		{"zero run_timeout", "name: x\n" + model + "limits: {run_timeout: 0s}\n", "limits.run_timeout: must be positive"},
		{"bad run_timeout", "name: x\n" + model + "limits: {run_timeout: soon}\n", `limits.run_timeout: must be a duration such as 10m, got "soon"`},
		{"zero history", "name: x\n" + model + "memory: {max_history_messages: 0}\n", "memory.max_history_messages: must be at least 1"},
		{"limits not a mapping", "name: x\n" + model + "limits: 5\n", "limits: must be a mapping"},
		{"duplicate key", "name: x\nname: y\n" + model, "name: defined twice (line 2)"},
		{"syntax error", "name: x\ndescription: a: b\n", "yaml: line 2: mapping values are not allowed"},
		{"empty file", "", "empty file"},
		{"two documents", "name: x\n" + model + "---\nname: y\n", "line 3: more than one YAML document"},
		{"not a mapping", "- name: x\n", "top level: must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := mustWriteDir(t, map[string]string{"bad.yaml": tt.content})
			_, err := agents.Load(dir, testOptions(nil))
			require.Error(t, err)
			assert.Contains(t, err.Error(), filepath.Join(dir, "bad.yaml")+": ")
			assert.Contains(t, err.Error(), tt.want)
			assert.ErrorIs(t, err, errdefs.ErrInvalid)
		})
	}
}

func TestLoad_RejectsDuplicateNames(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"a.yaml": "name: dup\nmodel: {provider: fake}\n",
		"b.yaml": "name: dup\nmodel: {provider: fake}\n",
	})
	_, err := agents.Load(dir, testOptions(nil))
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	want := filepath.Join(dir, "b.yaml") + `: name: agent "dup" already defined in ` + filepath.Join(dir, "a.yaml")
	assert.EqualError(t, err, want)
}

func TestLoad_ReportsEveryBadFile(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"a.yaml":  "name: a\nmodel: {provider: nope}\n",
		"b.yaml":  "name: b\nmodel: {provider: fake}\nbogus: 1\n",
		"ok.yaml": "name: ok\nmodel: {provider: fake}\n",
	})
	_, err := agents.Load(dir, testOptions(nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "a.yaml")+": model.provider")
	assert.Contains(t, err.Error(), filepath.Join(dir, "b.yaml")+": bogus: unknown field")
}
