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
	if cfg.Options["needs_key"] == true && cfg.APIKey == "" {
		return nil, llm.MissingAPIKey("")
	}
	if cfg.Options["needs_key_or_url"] == true && cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, llm.MissingAPIKey("model.base_url")
	}
	return &fakeModel{cfg: cfg}, nil
}

// builtinTools are the tool names kerneld registers out of the box,
// including spawn_agent, which the kernel provides itself.
var builtinTools = map[string]bool{"current_time": true, "memory_get": true, "memory_set": true, "spawn_agent": true}

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
    retry: never
max_turns: 8
max_resumes: 5
on_crash: interrupt
limits: {max_children: 2, max_depth: 3, run_timeout: 90s}
memory:
  max_history_messages: 50
  compaction: {at_tokens: 4000, keep_last: 6, model: gpt-4o-mini, prompt: Summarise.}
overrides: {models: [gpt-4o], reasoning_effort: true, temperature: true}
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
		Tools:        []agents.ToolRef{{Name: "current_time"}, {Name: "memory_set", RequireApproval: true, Retry: agents.RetryNever}},
		MaxTurns:     8,
		MaxResumes:   5,
		OnCrash:      agents.OnCrashInterrupt,
		ChildResults: agents.ChildResultsQueue,
		Limits:       agents.Limits{MaxChildren: 2, MaxDepth: 3, RunTimeout: 90 * time.Second},
		Memory: agents.MemoryPolicy{MaxHistoryMessages: 50, Compaction: &agents.CompactionPolicy{
			AtTokens: 4000, KeepLast: 6, Model: "gpt-4o-mini", Prompt: "Summarise.",
		}},
		Overrides: agents.OverridePolicy{Models: []string{"gpt-4o"}, ReasoningEffort: true, Temperature: true},
		Stream:    agents.StreamPolicy{MergeDeltas: true}, // the default of a file that does not say
		File:      filepath.Join(dir, "helper.yaml"),
		Provider:  got.Provider,

		ApprovalTimeout: 10 * time.Minute,
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
		assert.Equal(t, 3, s.MaxResumes, name)
		assert.Equal(t, agents.OnCrashContinue, s.OnCrash, name)
		assert.True(t, s.Continues(), name)
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
		{"unknown top-level field", "name: x\n" + model + "workspace: /tmp\n", "workspace: unknown field (line 3)"},
		{"mcp server without name", "name: x\n" + model + "mcp_servers: [{command: npx}]\n", "mcp_servers[0].name: required"},
		{"mcp server name with __", "name: x\n" + model + "mcp_servers: [{name: a__b, command: npx}]\n", "mcp_servers[0].name:"},
		{"mcp server with both transports", "name: x\n" + model + "mcp_servers: [{name: s, command: npx, url: 'http://h/mcp'}]\n", "mcp_servers[0]: set exactly one of command"},
		{"mcp server with neither transport", "name: x\n" + model + "mcp_servers: [{name: s}]\n", "mcp_servers[0]: set exactly one of command"},
		{"mcp server bad url", "name: x\n" + model + "mcp_servers: [{name: s, url: 'ftp://h'}]\n", "mcp_servers[0].url: must be an http or https URL"},
		{"mcp server twice", "name: x\n" + model + "mcp_servers: [{name: s, command: a}, {name: s, command: b}]\n", `mcp_servers[1].name: duplicate server "s"`},
		{"mcp unknown field", "name: x\n" + model + "mcp_servers: [{name: s, command: a, cwd: /}]\n", "mcp_servers[0].cwd: unknown field"},
		{"mcp tool not allowed", "name: x\n" + model + "mcp_servers: [{name: s, command: a, allow: [echo]}]\ntools: [{name: s__add, require_approval: true}]\n", `tools[0]: tool "s__add" is not in the allow list`},
		{"tool of unknown mcp server", "name: x\n" + model + "tools: [other__echo]\n", `tools[0]: unknown tool "other__echo"`},
		{"zero approval timeout", "name: x\n" + model + "approval_timeout: 0s\n", "approval_timeout: must be positive"},
		{"negative max_resumes", "name: x\n" + model + "max_resumes: -1\n", "max_resumes: must not be negative"},
		{"unknown on_crash", "name: x\n" + model + "on_crash: restart\n", `on_crash: must be "continue" or "interrupt", got "restart"`},
		{"unknown tool retry", "name: x\n" + model + "tools: [{name: current_time, retry: maybe}]\n", `tools[0].retry: must be "safe" or "never", got "maybe"`},
		{"bad child agent name", "name: x\n" + model + "child_agents: ['a b']\n", `child_agents[0]: "a b" is not an agent name`},
		{"unknown child agent", "name: x\n" + model + "child_agents: [ghost]\n", `child_agents[0]: unknown agent "ghost"`},
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
		{"empty override model", "name: x\n" + model + "overrides: {models: ['']}\n", "overrides.models[0]: must not be empty"},
		{"duplicate override model", "name: x\n" + model + "overrides: {models: [a, a]}\n", `overrides.models[1]: duplicate model "a"`},
		{"unknown override", "name: x\n" + model + "overrides: {provider: true}\n", "overrides.provider: unknown field"},
		{"mistyped override", "name: x\n" + model + "overrides: {temperature: maybe}\n", "overrides.temperature: cannot unmarshal"},
		{"compaction without threshold", "name: x\n" + model + "memory: {compaction: {keep_last: 2}}\n", "memory.compaction: set exactly one of at_tokens and at_messages"},
		{"compaction with both thresholds", "name: x\n" + model + "memory: {compaction: {at_tokens: 9, at_messages: 9, keep_last: 2}}\n", "memory.compaction: set exactly one"},
		{"compaction keeps nothing", "name: x\n" + model + "memory: {compaction: {at_messages: 9}}\n", "memory.compaction.keep_last: must be at least 1"},
		{"unknown permission mode", "name: x\n" + model + "permission_modes: [ask, yolo]\n", `permission_modes: "yolo" is not one of ask, read_only_auto, auto`},
		{"compaction keeps all", "name: x\n" + model + "memory: {compaction: {at_messages: 4, keep_last: 4}}\n", "memory.compaction.keep_last: must be less than at_messages (4)"},
		{"compaction unknown field", "name: x\n" + model + "memory: {compaction: {at_tokens: 9, keep_last: 2, every: 3}}\n", "memory.compaction.every: unknown field"},
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

func TestLoad_MCPServersAndChildren(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"a.yaml": `
name: a
model: {provider: fake}
child_agents: [b]
approval_timeout: 2m
mcp_servers:
  - name: everything
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything"]
    env: {TOKEN: "${TOKEN}"}
    allow: [echo]
  - name: remote
    url: https://tools.example/mcp
    headers: {Authorization: "Bearer ${TOKEN}"}
    call_timeout: 5s
tools: [{name: everything__echo, require_approval: true}]
`,
		"b.yaml": "name: b\nmodel: {provider: fake}\n",
	})
	r, err := agents.Load(dir, testOptions(map[string]string{"TOKEN": "t: #1"}))
	require.NoError(t, err)
	a, err := r.Get("a")
	require.NoError(t, err)
	assert.Equal(t, []agents.MCPServer{
		{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"},
			Env: map[string]string{"TOKEN": "t: #1"}, Allow: []string{"echo"}, CallTimeout: time.Minute},
		{Name: "remote", URL: "https://tools.example/mcp", Headers: map[string]string{"Authorization": "Bearer t: #1"},
			CallTimeout: 5 * time.Second},
	}, a.MCPServers, "a value with ': #' from the environment stays one string")
	assert.Equal(t, 2*time.Minute, a.ApprovalTimeout)
	assert.True(t, a.MaySpawn("b"))
	assert.False(t, a.MaySpawn("a"))

	ref, ok := a.Tool("everything__echo")
	assert.True(t, ok && ref.RequireApproval, "listed MCP tool with approval")
	_, ok = a.Tool("everything__add")
	assert.False(t, ok, "not in the allow list")
	ref, ok = a.Tool("remote__anything")
	assert.True(t, ok && !ref.RequireApproval, "a server without an allow list allows everything")
}

func TestLoad_UnavailableAgent(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"gpt.yaml": "name: gpt\nmodel: {provider: fake, needs_key: true, api_key: '${OPENAI_API_KEY}', base_url: '${OPENAI_BASE_URL}'}\n",
		"ok.yaml":  "name: ok\nmodel: {provider: fake}\n",
	})
	r, err := agents.Load(dir, testOptions(nil))
	require.NoError(t, err, "an agent missing its key must not stop the others")
	gpt, err := r.Get("gpt")
	require.NoError(t, err)
	assert.Nil(t, gpt.Provider)
	assert.Equal(t, "model.api_key is empty (OPENAI_API_KEY not set)", gpt.Unavailable, "only the variable behind the missing field")

	r, err = agents.Load(dir, testOptions(map[string]string{"OPENAI_API_KEY": "sk-1"}))
	require.NoError(t, err)
	gpt, _ = r.Get("gpt")
	assert.Empty(t, gpt.Unavailable)
	assert.NotNil(t, gpt.Provider)
}

// TestLoad_UnavailableAgent_Alternative: when a base URL would do instead
// of a key, the reason names both ways out.
func TestLoad_UnavailableAgent_Alternative(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"env.yaml":   "name: env\nmodel: {provider: fake, needs_key_or_url: true, api_key: '${OPENAI_API_KEY}', base_url: '${OPENAI_BASE_URL}'}\n",
		"plain.yaml": "name: plain\nmodel: {provider: fake, needs_key_or_url: true}\n",
	})
	r, err := agents.Load(dir, testOptions(nil))
	require.NoError(t, err)
	env, _ := r.Get("env")
	assert.Equal(t, "model.api_key is empty (OPENAI_API_KEY not set); "+
		"or set model.base_url (OPENAI_BASE_URL not set) to a server that needs no key", env.Unavailable)
	plain, _ := r.Get("plain")
	assert.Equal(t, "model.api_key is empty; or set model.base_url to a server that needs no key", plain.Unavailable)
}

// TestLoad_StreamMergeDeltas: an agent file may turn off the merging of
// delta bursts, which is on unless it says so.
func TestLoad_StreamMergeDeltas(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{
		"merged.yaml": "name: merged\nmodel: {provider: scripted, script: [{text: hi}]}\n",
		"tokens.yaml": "name: tokens\nmodel: {provider: scripted, script: [{text: hi}]}\nstream: {merge_deltas: false}\n",
	})
	reg, err := agents.Load(dir, testOptions(nil))
	require.NoError(t, err)
	merged, err := reg.Get("merged")
	require.NoError(t, err)
	tokens, err := reg.Get("tokens")
	require.NoError(t, err)
	assert.True(t, merged.Stream.MergeDeltas, "the default")
	assert.False(t, tokens.Stream.MergeDeltas, "merge_deltas: false")
}
