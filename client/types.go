package client

import (
	"encoding/json"
	"time"
)

// The client's own copies of the wire types of api/openapi.yaml. A
// member the API gives as null is the zero value here (a nil pointer for
// times and nested objects).

// Agent is an agent kerneld can run (GET /agents/{name}).
type Agent struct {
	Name               string           `json:"name"`
	Description        string           `json:"description"`
	Model              AgentModel       `json:"model"`
	Tools              []AgentTool      `json:"tools"`
	MaxTurns           int              `json:"max_turns"`
	Limits             AgentLimits      `json:"limits"`
	MaxHistoryMessages int              `json:"max_history_messages"`
	Available          bool             `json:"available"`
	UnavailableReason  string           `json:"unavailable_reason"` // why not Available
	MCPServers         []AgentMCPServer `json:"mcp_servers"`
}

// AgentModel names an agent's model.
type AgentModel struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

// AgentTool is a tool an agent may call.
type AgentTool struct {
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Parameters      json.RawMessage `json:"parameters"` // JSON Schema; null when not offered now
	RequireApproval bool            `json:"require_approval"`
	MCPServer       string          `json:"mcp_server"`
}

// AgentLimits bound an agent's sessions and runs.
type AgentLimits struct {
	MaxChildren       int   `json:"max_children"`
	MaxDepth          int   `json:"max_depth"`
	RunTimeoutSeconds int64 `json:"run_timeout_seconds"`
}

// AgentMCPServer is one of an agent's MCP servers.
type AgentMCPServer struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio | http
	State     string `json:"state"`     // stopped | starting | running | failed
	Error     string `json:"error"`
}

// Session states.
const (
	SessionActive       = "active"
	SessionRunning      = "running"
	SessionWaitingInput = "waiting_input"
	SessionCompleted    = "completed"
	SessionError        = "error"
	SessionClosed       = "closed"
)

// Session is a conversation with an agent.
type Session struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	Name  string `json:"name"`
	// Title is what a list shows: set by a client or generated after the
	// first run.
	Title    string            `json:"title"`
	Metadata map[string]string `json:"metadata"`
	State    string            `json:"state"`
	// Status is what it is doing: idle, running, waiting_input, queued,
	// stalled, failed or closed.
	Status      string `json:"status"`
	ParentID    string `json:"parent_id"`
	RootID      string `json:"root_id"`
	Depth       int    `json:"depth"`
	Tenant      string `json:"tenant"`
	ActiveRunID string `json:"active_run_id"`
	LastSeq     int64  `json:"last_seq"`
	// Unread counts the assistant messages after the caller's read
	// cursor, ReadSeq (see Client.MarkRead).
	Unread  int   `json:"unread"`
	ReadSeq int64 `json:"read_seq"`
	// QueuedRuns counts the runs waiting to start.
	QueuedRuns int `json:"queued_runs"`
	// Instructions are the session's own, added to its agent's prompt.
	Instructions string      `json:"instructions"`
	TTL          string      `json:"ttl"`
	ExpiresAt    *time.Time  `json:"expires_at"`
	Inherit      *Inherit    `json:"inherit"`
	Overrides    *Overrides  `json:"overrides"`
	ForkedFrom   *ForkedFrom `json:"forked_from"`
	// PermissionMode is how its calls that need approval get it: ask,
	// read_only_auto or auto.
	PermissionMode string `json:"permission_mode"`
	// AlwaysApproved are the standing approvals given with Always.
	AlwaysApproved []StandingApproval `json:"always_approved"`
	// ClosedReason says why a closed session was closed.
	ClosedReason string    `json:"closed_reason"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Overrides change a session's (or a run's) model settings from its
// agent's; zero members keep the agent's.
type Overrides struct {
	Model           string   `json:"model,omitempty"`
	ReasoningEffort string   `json:"reasoning_effort,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxTokens       int      `json:"max_tokens,omitempty"`
}

// ForkedFrom names the session and the message a fork was made at.
type ForkedFrom struct {
	SessionID       string `json:"session_id"`
	MessagePosition int64  `json:"message_position"`
}

// Inherit is what a child session inherits from its parent.
type Inherit struct {
	Memory string `json:"memory"` // none | copy
}

// CreateSessionRequest is the body of POST /sessions.
type CreateSessionRequest struct {
	// ID is a client-chosen id; the same id and agent again answer the
	// existing session. "" lets kerneld choose.
	ID    string `json:"id,omitempty"`
	Agent string `json:"agent"`
	Name  string `json:"name,omitempty"`
	Title string `json:"title,omitempty"` // "": kerneld titles it after its first run
	// Instructions are added to the agent's system prompt.
	Instructions string                     `json:"instructions,omitempty"`
	Metadata     map[string]string          `json:"metadata,omitempty"`
	ParentID     string                     `json:"parent_id,omitempty"`
	Memory       map[string]json.RawMessage `json:"memory,omitempty"`
	TTL          string                     `json:"ttl,omitempty"` // e.g. "24h"
	Inherit      *Inherit                   `json:"inherit,omitempty"`
	Overrides    *Overrides                 `json:"overrides,omitempty"`
	// PermissionMode is ask (the default), read_only_auto or auto, within
	// what the agent allows.
	PermissionMode string `json:"permission_mode,omitempty"`
}

// StandingApproval approves, without asking, a tool's calls in a session
// (with exactly Arguments when they are not null).
type StandingApproval struct {
	ToolName   string          `json:"tool_name"`
	Arguments  json.RawMessage `json:"arguments"`
	ToolCallID string          `json:"tool_call_id"`
}

// UpdateSessionRequest is the body of PATCH /sessions/{id}. A nil Name
// leaves the name alone; a Metadata value of nil removes its key.
type UpdateSessionRequest struct {
	Name           *string            `json:"name,omitempty"`
	Title          *string            `json:"title,omitempty"` // "" clears it for good
	Metadata       map[string]*string `json:"metadata,omitempty"`
	PermissionMode *string            `json:"permission_mode,omitempty"`
	Instructions   *string            `json:"instructions,omitempty"` // "" clears them
}

// ListSessionsOptions filter and page GET /sessions.
type ListSessionsOptions struct {
	Agent    string
	State    string
	ParentID string
	Page
}

// Page asks for one page of a list: at most Limit items (0: the server's
// default) after Cursor (the NextCursor of the previous page).
type Page struct {
	Limit  int
	Cursor string
}

// SessionPage is one page of sessions; NextCursor is "" on the last.
type SessionPage struct {
	Data       []Session `json:"data"`
	NextCursor string    `json:"next_cursor"`
}

// Run states.
const (
	RunQueued       = "queued"
	RunRunning      = "running"
	RunWaitingInput = "waiting_input"
	RunSucceeded    = "succeeded"
	RunFailed       = "failed"
	RunCancelled    = "cancelled"
	RunInterrupted  = "interrupted"
	RunSteered      = "steered"
)

// Run is one turn of a session: the processing of one input.
type Run struct {
	ID             string     `json:"id"`
	SessionID      string     `json:"session_id"`
	State          string     `json:"state"`
	Input          string     `json:"input"`
	IdempotencyKey string     `json:"idempotency_key"`
	IfBusy         string     `json:"if_busy"`
	SteeredInto    string     `json:"steered_into"`
	Model          string     `json:"model"`
	Overrides      *Overrides `json:"overrides"`
	Kind           string     `json:"kind"` // input, or compaction (CompactSession)
	// Source says where the run's input came from: api, console, cli,
	// agui, ai_sdk, schedule or child_result; "" for a run kerneld
	// started itself.
	Source    string     `json:"source"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Error     *RunError  `json:"error"`
	Usage     Usage      `json:"usage"`
	StartSeq  int64      `json:"start_seq"` // 0 until it starts
	EndSeq    int64      `json:"end_seq"`   // 0 until it ends
	// Resumes counts the times the run was continued after the process
	// running it stopped; its stream goes on under the same run.
	Resumes int `json:"resumes"`
}

// RunError says why a run failed.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Usage counts the tokens of a run's model calls.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Busy policies of CreateRunRequest.IfBusy.
const (
	IfBusyReject    = "reject"
	IfBusyQueue     = "queue"
	IfBusyInterrupt = "interrupt"
	IfBusySteer     = "steer"
)

// CreateRunRequest is the input of POST /sessions/{id}/run.
type CreateRunRequest struct {
	Input  string `json:"input"`
	IfBusy string `json:"if_busy,omitempty"`
	// Source says which client posts the run, recorded as its Source:
	// "api" (the default), "console" or "cli".
	Source string `json:"source,omitempty"`
	// IdempotencyKey makes retries of the request safe: kerneld answers
	// the original run for a key it has seen on the session within 24h.
	IdempotencyKey string `json:"-"`
}

// AgentRunRequest is the input of POST /run: a run of agent in the
// session SessionID, created first if it does not exist ("" for a new
// session).
type AgentRunRequest struct {
	Agent     string `json:"agent"`
	Input     string `json:"input"`
	SessionID string `json:"session_id,omitempty"`
	IfBusy    string `json:"if_busy,omitempty"`
}

// Regeneration is a run answered again: a fork of the session before
// the run's input, and the new run of that input in it.
type Regeneration struct {
	Session Session `json:"session"`
	Run     Run     `json:"run"`
}

// Compaction is the result of CompactSession: the summarising run, and
// the summary message that replaced the older history (nil when there was
// nothing to compact).
type Compaction struct {
	Run     Run      `json:"run"`
	Summary *Message `json:"compaction"`
}

// Clear is the result of ClearSession: the clearing run, and the clear
// entry it added to the history, from which the history is shown and the
// model sees it (nil when the run failed before adding it).
type Clear struct {
	Run   Run      `json:"run"`
	Entry *Message `json:"clear"`
}

// RunPage is one page of runs, newest first.
type RunPage struct {
	Data       []Run  `json:"data"`
	NextCursor string `json:"next_cursor"`
}

// Approval decisions.
const (
	Approve = "approve"
	Deny    = "deny"
	// Always approves the call and the tool's later calls in the session.
	Always = "always"
)

// Approval is a tool call that needs a person's decision.
type Approval struct {
	ToolCallID  string          `json:"tool_call_id"`
	ToolName    string          `json:"tool_name"`
	Arguments   json.RawMessage `json:"arguments"`
	State       string          `json:"state"` // pending | approved | denied | cancelled
	Reason      string          `json:"reason"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   *time.Time      `json:"expires_at"`
	DecidedAt   *time.Time      `json:"decided_at"`
}

// Decision answers an approval: Approve, or Deny with a Reason.
type Decision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// SameArguments limits Always to later calls with the same arguments.
	SameArguments bool `json:"same_arguments,omitempty"`
}

// InboxItem is an approval waiting in the inbox, with where to decide it.
type InboxItem struct {
	Approval
	SessionID string `json:"session_id"`
	Agent     string `json:"agent"`
	RunID     string `json:"run_id"`
}

// InboxPage is one page of the inbox; NextCursor is "" on the last.
type InboxPage struct {
	Data       []InboxItem `json:"data"`
	NextCursor string      `json:"next_cursor"`
}

// Message is one message of a session's conversation history.
type Message struct {
	ID         string     `json:"id"`
	Position   int64      `json:"position"`
	RunID      string     `json:"run_id"`
	Role       string     `json:"role"` // system | user | assistant | tool | compaction
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
	IsError    bool       `json:"is_error"`
	CreatedAt  time.Time  `json:"created_at"`
}

// UIMessage is a message of a transcript, in the AI SDK's shape: a user
// message, or the answer of the run that answered one (id "answer:" + the
// user message's id). Parts are kept as the AI SDK defines them: each
// has a "type" ("text", "step-start", "tool-<name>", ...) and the members
// that type has.
type UIMessage struct {
	ID    string           `json:"id"`
	Role  string           `json:"role"` // user | assistant
	Parts []map[string]any `json:"parts"`
}

// ToolCall is a tool call an assistant message made.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text
}

// MessagePage is one page of messages, oldest first.
type MessagePage struct {
	Data       []Message `json:"data"`
	NextCursor string    `json:"next_cursor"`
	// Context is what the model sees before the history.
	Context ConversationContext `json:"context"`
}

// ConversationContext is what the model sees before a session's history:
// its agent's system prompt, the session's own instructions, and the
// system prompt they make together ("" for an agent no longer
// configured). Memory and a run's context are added at each model call.
type ConversationContext struct {
	SystemPrompt string `json:"system_prompt"`
	Instructions string `json:"instructions"`
	System       string `json:"system"`
}

// MemoryEntry is one key of a session's memory.
type MemoryEntry struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// EventPage is one JSON page of a session's event log.
type EventPage struct {
	Events []Event
	// NextAfter is the seq of the last event, or the cursor when there
	// is none: pass it as After for the next page.
	NextAfter int64
}

// EventPageOptions ask for a JSON page of events.
type EventPageOptions struct {
	After int64 // the seq of the last event already read
	Limit int   // 1 to 1000; 0: the server's default (100)
}

// TenantUsage is the caller's quotas and what it uses of them (GET
// /usage). A limit of 0 is no limit; an available count is nil when its
// limit is off.
type TenantUsage struct {
	Tenant string `json:"tenant"`
	Limits struct {
		RequestsPerSecond float64 `json:"requests_per_second"`
		RequestBurst      int64   `json:"request_burst"`
		MaxSessions       int64   `json:"max_sessions"`
		RunsPerMinute     int64   `json:"runs_per_minute"`
		MaxConcurrentRuns int64   `json:"max_concurrent_runs"`
		MaxStreams        int64   `json:"max_streams"`
		TokensPerDay      int64   `json:"tokens_per_day"`
	} `json:"limits"`
	Usage struct {
		RequestsAvailable *int64 `json:"requests_available"`
		Sessions          int64  `json:"sessions"`
		RunsAvailable     *int64 `json:"runs_available"`
		ConcurrentRuns    int64  `json:"concurrent_runs"`
		Streams           int64  `json:"streams"`
		TokensToday       int64  `json:"tokens_today"`
	} `json:"usage"`
}
