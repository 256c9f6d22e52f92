// Package kerneltest builds real kernels for tests: the memory store, the
// built-in tools plus test tools, and scripted agents defined in YAML. Only
// the model is fake, and it is kerneld's own scripted model.
package kerneltest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// Agents every test kernel has, unless Options.Agents replaces them.
const (
	// Echo streams its input back word by word, at once.
	Echo = `
name: echo
description: echoes its input
model: {provider: scripted, script: [{text: "{input}"}]}
tools: [current_time, memory_get, memory_set]
`
	// ToolUser calls current_time, then answers.
	ToolUser = `
name: tooluser
description: calls a tool, then answers
model:
  provider: scripted
  script:
    - {text: "Checking the time.", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "Done."}
tools: [current_time]
`
	// Failing fails after two tokens.
	Failing = `
name: failing
description: fails mid-answer
model: {provider: scripted, script: [{text: "one two three four"}], error: "model overloaded", fail_after_tokens: 2}
`
	// Slow streams one token every 20ms, for cancelling mid-message.
	Slow = `
name: slow
description: answers slowly
model: {provider: scripted, token_delay: 20ms, script: [{text: "a b c d e f g h i j k l m n o p q r s t u v w x y z"}]}
`
	// Waiter calls the blocking test tool "wait", for cancelling mid-tool.
	Waiter = `
name: waiter
description: calls a tool that blocks
model:
  provider: scripted
  script:
    - {text: "Waiting.", tool_calls: [{name: wait}, {name: current_time}]}
    - {text: "Done."}
tools: [wait, current_time]
`
	// Looper calls a tool on every turn, so it runs into max_turns.
	Looper = `
name: looper
description: never stops calling tools
model: {provider: scripted, script: [{text: "again", tool_calls: [{name: current_time}]}]}
tools: [current_time]
max_turns: 3
`
	// Clumsy calls a tool that fails, a tool it may not use and a tool with
	// bad arguments, then answers.
	Clumsy = `
name: clumsy
description: makes bad tool calls
model:
  provider: scripted
  script:
    - {tool_calls: [{name: fail}, {name: forbidden_tool}, {name: current_time, arguments: {timezone: Nowhere/Else}}]}
    - {text: "Recovered."}
tools: [fail, current_time]
`
	// Delegator asks the echo agent through spawn_agent, then answers.
	Delegator = `
name: delegator
description: delegates to echo
model:
  provider: scripted
  script:
    - {text: "Asking echo.", tool_calls: [{name: spawn_agent, arguments: {agent: echo, input: "hello from the parent"}}]}
    - {text: "Echo answered."}
tools: [spawn_agent, current_time, memory_get, memory_set]
child_agents: [echo, slow, tooluser, delegator]
limits: {max_children: 2, max_depth: 2}
`
	// Gated makes two calls that need approval and one that does not,
	// then answers.
	Gated = `
name: gated
description: saves to memory with permission
model:
  provider: scripted
  script:
    - {text: "Saving.", tool_calls: [{name: memory_set, arguments: {key: a, value: 1}}, {name: memory_set, arguments: {key: b, value: 2}}, {name: current_time}]}
    - {text: "Done."}
tools: [{name: memory_set, require_approval: true}, current_time]
approval_timeout: 1h
`
	// Frontend calls page_title, a tool its AG-UI client offers, then
	// answers with the result.
	Frontend = `
name: frontend
description: asks the client for the page title
model:
  provider: scripted
  script:
    - {text: "Asking the page.", tool_calls: [{name: page_title, arguments: {selector: h1}}]}
    - {text: "Got it."}
tools: [current_time]
`
	// Parent may have children two levels deep, at most two at a time.
	Parent = `
name: parent
description: has children
model: {provider: scripted, script: [{text: "ok"}]}
limits: {max_children: 2, max_depth: 2}
`
)

// DefaultAgents are the agents a test kernel has by default.
var DefaultAgents = []string{Echo, ToolUser, Failing, Slow, Waiter, Looper, Clumsy, Parent, Delegator, Gated, Frontend}

// Options configure New.
type Options struct {
	Agents    []string // YAML agent definitions; nil means DefaultAgents
	Observers []kernel.Observer
	Limits    kernel.Limits
	Store     kernel.Store // nil means a fresh memory store
	Now       func() time.Time
	Retention kernel.Retention
	// Replication makes the kernel one of several replicas sharing Store.
	Replication kernel.Replication
	// Providers adds model providers to the scripted one, for testing a
	// real provider client inside a real kernel.
	Providers map[string]llm.Factory
	// Quotas counts the tenants' runs and tokens; nil counts none.
	Quotas kernel.Quotas
	// StallAfter is the kernel's stall time; 0 means its default.
	StallAfter time.Duration
	// Tools are registered beside the built-in and test tools.
	Tools []tools.Tool
	// Feed records the sessions' changes; Titles titles them.
	Feed   kernel.FeedSink
	Titles kernel.Titles
	// Images keeps the images of inputs; nil keeps them in Store when it
	// can (images.Store), as kerneld does.
	Images *images.Library
	// SessionMCP configures the MCP servers clients attach to sessions.
	SessionMCP kernel.SessionMCP
	// Logger receives the kernel's logs; nil drops them.
	Logger *slog.Logger
	// Guards answers for the agents' guards; nil asks none.
	Guards kernel.Guards
	// Announcer hears what webhooks would announce; nil announces nothing.
	Announcer kernel.Announcer
}

// Kernel is a test kernel with the pieces a test may want to reach.
type Kernel struct {
	*kernel.Kernel
	Store kernel.Store
	Wait  *WaitTool
	// Images is the library the kernel keeps input images in.
	Images *images.Library
	// AgentsDir holds the agent files, agent0.yaml, agent1.yaml, … in the
	// order of Options.Agents: rewrite them and call ReloadAgents.
	AgentsDir string
}

// New returns a kernel closed when the test ends.
func New(tb testing.TB, opts Options) *Kernel {
	tb.Helper()
	wait := NewWaitTool()
	reg := tools.NewRegistry(append(append(tools.Builtins(), wait, FailTool{}), opts.Tools...)...)
	registry, dir := mustAgents(tb, opts.Agents, opts.Providers, reg)
	if opts.Store == nil {
		opts.Store = memory.New()
	}
	if st, ok := opts.Store.(images.Store); ok && opts.Images == nil {
		opts.Images = images.New(st, images.Limits{}, nil)
	}
	k, err := kernel.New(kernel.Config{
		Agents: registry, Tools: reg, Store: opts.Store, Observers: opts.Observers,
		Limits: opts.Limits, Now: opts.Now, Retention: opts.Retention, Replication: opts.Replication,
		Quotas: opts.Quotas, StallAfter: opts.StallAfter, Feed: opts.Feed, Titles: opts.Titles, Images: opts.Images,
		SessionMCP: opts.SessionMCP,
		Logger:     opts.Logger, Guards: opts.Guards, Announcer: opts.Announcer,
	})
	if err != nil {
		tb.Fatalf("new kernel: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			tb.Errorf("close kernel: %v", err)
		}
	})
	return &Kernel{Kernel: k, Store: opts.Store, Wait: wait, AgentsDir: dir, Images: opts.Images}
}

// mustAgents loads agent definitions through the real loader, from files
// in the directory it returns. Agents never read the environment: their
// files name every value. An agent whose file does not say how it streams
// logs every delta as it came (stream.merge_deltas false), so tests that
// count frames count tokens, whatever the machine's load.
func mustAgents(tb testing.TB, defs []string, extra map[string]llm.Factory, reg *tools.Registry) (*agents.Registry, string) {
	tb.Helper()
	if defs == nil {
		defs = DefaultAgents
	}
	providers := map[string]llm.Factory{"scripted": scripted.New}
	maps.Copy(providers, extra)
	dir := tb.TempDir()
	for i, d := range defs {
		if !strings.Contains(d, "\nstream:") {
			d = strings.TrimRight(d, "\n") + "\nstream: {merge_deltas: false}\n"
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("agent%d.yaml", i)), []byte(d), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	registry, err := agents.Load(dir, agents.Options{
		Providers: providers,
		KnownTool: func(name string) bool { return reg.Has(name) || name == kernel.SpawnAgentTool },
		Getenv:    func(string) string { return "" },
	})
	if err != nil {
		tb.Fatalf("load agents: %v", err)
	}
	return registry, dir
}

// WaitTool is the tool "wait": it blocks until released or cancelled, so
// tests can act while a tool call is in flight.
type WaitTool struct {
	started chan struct{} // receives once per call, when it starts
	release chan struct{}
	once    sync.Once
}

// NewWaitTool returns a wait tool that blocks until Release.
func NewWaitTool() *WaitTool {
	return &WaitTool{started: make(chan struct{}, 64), release: make(chan struct{})}
}

// Started returns a channel that receives when a call starts.
func (t *WaitTool) Started() <-chan struct{} { return t.started }

// Release lets every call, current and future, return.
func (t *WaitTool) Release() { t.once.Do(func() { close(t.release) }) }

// Definition implements tools.Tool.
func (t *WaitTool) Definition() tools.Definition {
	return tools.Definition{Name: "wait", Description: "Blocks until released.", Parameters: []byte(`{"type":"object"}`)}
}

// Call implements tools.Tool.
func (t *WaitTool) Call(ctx context.Context, _ tools.Call) (string, error) {
	t.started <- struct{}{}
	select {
	case <-t.release:
		return `"released"`, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// FailTool is the tool "fail": every call fails.
type FailTool struct{}

// Definition implements tools.Tool.
func (FailTool) Definition() tools.Definition {
	return tools.Definition{Name: "fail", Description: "Always fails.", Parameters: []byte(`{"type":"object"}`)}
}

// Call implements tools.Tool.
func (FailTool) Call(context.Context, tools.Call) (string, error) {
	return "", errors.New("the disk is on fire")
}
