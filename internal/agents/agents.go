// Package agents owns agent definitions: the Spec type, the YAML files in
// configs/agents that describe agents, and the Registry the kernel looks
// them up in.
//
// It describes agents and builds each one's model provider; it must not run
// them (that is the kernel's job), call models or tools, or know about HTTP.
package agents

import (
	"slices"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/llm"
)

// Defaults for what an agent file leaves out. They bound a runaway agent
// while leaving room for ordinary multi-step tool use.
const (
	defaultMaxTurns           = 16
	defaultMaxChildren        = 5
	defaultMaxDepth           = 1
	defaultRunTimeout         = 10 * time.Minute
	defaultMaxHistoryMessages = 200
	defaultApprovalTimeout    = 10 * time.Minute
	defaultMCPCallTimeout     = 60 * time.Second
	defaultMaxResumes         = 3
)

// Spec is one agent definition. Specs handed out by a Registry share their
// slices and maps with it, so callers must treat them as read-only.
type Spec struct {
	Name         string
	Description  string
	Model        llm.ModelConfig
	SystemPrompt string
	Tools        []ToolRef // the only tools this agent may call
	MaxTurns     int       // model calls per run; default 16
	Limits       Limits
	Memory       MemoryPolicy
	Stream       StreamPolicy
	File         string // the file it was loaded from ("" when built in code)
	// MCPServers are the Model Context Protocol servers whose tools the
	// agent may call, as <server>__<tool>.
	MCPServers []MCPServer
	// ApprovalTimeout is how long a tool call that requires approval waits
	// for a decision before it is denied; default 10m.
	ApprovalTimeout time.Duration
	// ChildAgents are the agents this one may spawn; none when empty.
	ChildAgents []string
	// ChildResults says how the answer of a child this agent started in
	// the background (spawn_agent with wait: false) reaches its session
	// while a run is active: ChildResultsQueue (the default) queues it as
	// the next run; ChildResultsSteer folds it into the active run before
	// its next model call. An idle session runs it at once either way.
	ChildResults string
	// Peers are the agents that may take turns with this one on one
	// conversation: a run of agent B on a session of agent A needs B in
	// A's peers, A in B's, and B among the session's agents.
	Peers []string
	// MaxResumes bounds how often a run of the agent is continued after
	// its process died under it (a crash, a replica lost): the next time,
	// it ends interrupted with code resume_limit. Default 3.
	MaxResumes int
	// OnCrash says what becomes of a run left unfinished by its process
	// (a crash, a replica lost, a shutdown): OnCrashContinue (the default)
	// continues it from its last completed step; OnCrashInterrupt ends it
	// interrupted.
	OnCrash string
	// TitleModel is the model that titles the agent's sessions after
	// their first run; the run's own model when empty.
	TitleModel string
	// NoClientTools refuses the tools an AG-UI client offers a run
	// (agent file `client_tools: false`); by default a client may.
	NoClientTools bool
	// Overrides are the model settings clients may choose per session or
	// run; none when empty.
	Overrides OverridePolicy
	// Guard, when set, is asked before each tool call (and each run, if it
	// says so) whether the agent may go ahead; see hooks.go.
	Guard *GuardSpec
	// PermissionModes are the permission modes a session of the agent may
	// choose (agent file `permission_modes`); default ask and
	// read_only_auto. Ask is always allowed: it is the strictest.
	PermissionModes []string
	// Webhooks receive the events of the agent's sessions.
	Webhooks []WebhookSpec
	// Provider is built from Model by the provider's factory. It is nil
	// exactly when the agent is Unavailable.
	Provider llm.Provider
	// Unavailable, when set, says why the agent cannot run, e.g. that the
	// variable holding its API key is not set. It is listed but refuses
	// new sessions.
	Unavailable string
	unsetEnv    map[string][]string // field path → the ${VAR}s in it that were not set
}

// MCPServer is one MCP server an agent uses: a command speaking MCP over
// stdio, or a URL speaking streamable HTTP.
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
	// Allow, when not empty, lists the only tools of the server the agent
	// may call.
	Allow []string
	// CallTimeout bounds one tool call; default 60s.
	CallTimeout time.Duration
}

// MCPToolName is the name a model sees for tool of MCP server server.
func MCPToolName(server, tool string) string { return server + MCPSeparator + tool }

// MCPSeparator joins an MCP server's name and its tool's.
const MCPSeparator = "__"

// ToolRef is an agent's permission to call one tool.
type ToolRef struct {
	Name string
	// RequireApproval makes every call wait for a human to approve it.
	RequireApproval bool
	// Retry says whether a call of the tool that a crash cut off may be
	// made again when the run continues: RetrySafe or RetryNever; ""
	// leaves it to the tool (tools.Definition.RetrySafe).
	Retry string
}

// Permission modes: how a session's tool calls that need approval get it
// (Spec.PermissionModes).
const (
	// PermissionAsk asks a person for every such call (the default).
	PermissionAsk = "ask"
	// PermissionReadOnlyAuto approves, without asking, the calls of tools
	// that say they only read (MCP readOnlyHint, a built-in's own flag).
	PermissionReadOnlyAuto = "read_only_auto"
	// PermissionAuto approves every call without asking.
	PermissionAuto = "auto"
)

// PermissionModes lists the permission modes, strictest first.
var PermissionModes = []string{PermissionAsk, PermissionReadOnlyAuto, PermissionAuto}

// AllowsPermissionMode reports whether a session of the agent may choose
// mode m.
func (s Spec) AllowsPermissionMode(m string) bool {
	allowed := s.PermissionModes
	if allowed == nil {
		allowed = defaultPermissionModes
	}
	return m == PermissionAsk || slices.Contains(allowed, m)
}

// AllowedPermissionModes lists the modes a session of the agent may
// choose, strictest first.
func (s Spec) AllowedPermissionModes() []string {
	return slices.DeleteFunc(slices.Clone(PermissionModes), func(m string) bool { return !s.AllowsPermissionMode(m) })
}

// defaultPermissionModes are the modes an agent file that lists none
// allows: auto, which runs every gated tool unasked, must be chosen.
var defaultPermissionModes = []string{PermissionAsk, PermissionReadOnlyAuto}

// What becomes of a run its process left unfinished (Spec.OnCrash).
const (
	OnCrashContinue  = "continue"
	OnCrashInterrupt = "interrupt"
)

// Whether a tool call cut off by a crash is made again (ToolRef.Retry).
const (
	RetrySafe  = "safe"
	RetryNever = "never"
)

// StreamPolicy says how a run's events are logged and streamed.
type StreamPolicy struct {
	// MergeDeltas merges the consecutive deltas of one message that queue
	// up while the store commits into one event (agent file
	// stream.merge_deltas, default true; false in a Spec built in code).
	MergeDeltas bool
}

// Limits bound what one run of the agent may do.
type Limits struct {
	MaxChildren int           // child sessions one run may spawn; default 5
	MaxDepth    int           // how deep children may nest below a root session; default 1
	RunTimeout  time.Duration // wall-clock limit of a run; default 10m
}

// MemoryPolicy bounds the conversation history kept for the model.
type MemoryPolicy struct {
	MaxHistoryMessages int // default 200
	// Compaction, when set, summarises old history instead of letting the
	// window drop it.
	Compaction *CompactionPolicy
}

// Tool returns the agent's reference to the named tool, if it lists it.
// The kernel asks before every tool call, because a model may name a tool
// the agent was never given. A tool of one of the agent's MCP servers is
// the agent's if its server allows it; listing it in tools only adds
// require_approval.
func (s Spec) Tool(name string) (ToolRef, bool) {
	for _, t := range s.Tools {
		if t.Name == name {
			return t, true
		}
	}
	if srv, ok := s.MCPServerOf(name); ok && srv.Allows(strings.TrimPrefix(name, srv.Name+MCPSeparator)) {
		return ToolRef{Name: name}, true
	}
	return ToolRef{}, false
}

// MCPServerOf returns the MCP server a tool name like "srv__tool" names.
func (s Spec) MCPServerOf(name string) (MCPServer, bool) {
	server, _, ok := strings.Cut(name, MCPSeparator)
	if !ok {
		return MCPServer{}, false
	}
	for _, srv := range s.MCPServers {
		if srv.Name == server {
			return srv, true
		}
	}
	return MCPServer{}, false
}

// Allows reports whether the server's allow list admits tool.
func (m MCPServer) Allows(tool string) bool {
	return len(m.Allow) == 0 || slices.Contains(m.Allow, tool)
}

// Continues reports whether a run of the agent that its process left
// unfinished is continued rather than ended interrupted.
func (s Spec) Continues() bool { return s.OnCrash != OnCrashInterrupt }

// How a background child's answer reaches a busy parent (Spec.ChildResults).
const (
	ChildResultsQueue = "queue"
	ChildResultsSteer = "steer"
)

// PeersWith reports whether the agent names agent among its peers.
func (s Spec) PeersWith(agent string) bool { return slices.Contains(s.Peers, agent) }

// MaySpawn reports whether the agent may spawn agent.
func (s Spec) MaySpawn(agent string) bool { return slices.Contains(s.ChildAgents, agent) }

// Options are what loading needs from the rest of kerneld. They are passed
// in rather than imported so agents does not depend on every provider and
// tool package.
type Options struct {
	Providers map[string]llm.Factory // by provider name: "scripted", later "openai", "anthropic"
	KnownTool func(name string) bool // reports whether a tool name exists; nil accepts any
	Getenv    func(string) string    // for ${VAR} expansion; nil means os.Getenv
	// CheckGuard and CheckWebhook check a guard and a webhook beyond their
	// shape (where requests may go, the secret's form); nil accepts any.
	// Their errors start with the field, e.g. "url: must be https".
	CheckGuard   func(GuardSpec) error
	CheckWebhook func(WebhookSpec) error
}

// withDefaults fills the zero fields of s. Code-built specs cannot say
// "zero children" this way; files can, because their defaults are applied
// before decoding (see defaultSpec).
func withDefaults(s Spec) Spec {
	if s.MaxTurns == 0 {
		s.MaxTurns = defaultMaxTurns
	}
	if s.Limits.MaxChildren == 0 {
		s.Limits.MaxChildren = defaultMaxChildren
	}
	if s.Limits.MaxDepth == 0 {
		s.Limits.MaxDepth = defaultMaxDepth
	}
	if s.Limits.RunTimeout == 0 {
		s.Limits.RunTimeout = defaultRunTimeout
	}
	if s.Memory.MaxHistoryMessages == 0 {
		s.Memory.MaxHistoryMessages = defaultMaxHistoryMessages
	}
	if s.ApprovalTimeout == 0 {
		s.ApprovalTimeout = defaultApprovalTimeout
	}
	if s.MaxResumes == 0 {
		s.MaxResumes = defaultMaxResumes
	}
	if s.ChildResults == "" {
		s.ChildResults = ChildResultsQueue
	}
	if s.OnCrash == "" {
		s.OnCrash = OnCrashContinue
	}
	s.MCPServers = slices.Clone(s.MCPServers) // the caller's slice stays as it was
	for i := range s.MCPServers {
		if s.MCPServers[i].CallTimeout == 0 {
			s.MCPServers[i].CallTimeout = defaultMCPCallTimeout
		}
	}
	return s
}

// defaultSpec is the starting point a file is decoded over, so a field the
// file sets explicitly (even to 0) keeps the file's value.
func defaultSpec() Spec {
	return withDefaults(Spec{})
}
