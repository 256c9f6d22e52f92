package session

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// RunState is where a run is in its life.
type RunState string

// Run states. Succeeded, failed, cancelled and interrupted are terminal.
const (
	RunQueued       RunState = "queued"
	RunRunning      RunState = "running"
	RunWaitingInput RunState = "waiting_input"
	RunSucceeded    RunState = "succeeded"
	RunFailed       RunState = "failed"
	RunCancelled    RunState = "cancelled"
	RunInterrupted  RunState = "interrupted"
	// RunSteered is a run posted with if_busy steer whose input joined the
	// active run (RunExt.SteeredInto) instead of running on its own.
	RunSteered RunState = "steered"
)

var runTransitions = map[RunState][]RunState{
	RunQueued:       {RunRunning, RunCancelled, RunSteered, RunFailed},
	RunRunning:      {RunWaitingInput, RunSucceeded, RunFailed, RunCancelled, RunInterrupted},
	RunWaitingInput: {RunRunning, RunFailed, RunCancelled, RunInterrupted},
	RunSucceeded:    nil,
	RunFailed:       nil,
	RunCancelled:    nil,
	RunInterrupted:  nil,
	RunSteered:      nil,
}

// Valid reports whether s is a known run state.
func (s RunState) Valid() bool {
	_, ok := runTransitions[s]
	return ok
}

// Terminal reports whether a run in state s has ended for good.
func (s RunState) Terminal() bool { return s.Valid() && len(runTransitions[s]) == 0 }

// CanBecome reports whether a run in state s may move to state to.
func (s RunState) CanBecome(to RunState) bool {
	for _, next := range runTransitions[s] {
		if next == to {
			return true
		}
	}
	return false
}

// Usage counts the tokens a run's model calls consumed.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// RunError says why a run failed. Code is one of the RUN_ERROR codes.
type RunError struct {
	Code    string
	Message string
}

// RUN_ERROR codes.
const (
	ErrorCodeInterrupted = "interrupted" // the process stopped under the run
	ErrorCodeTimeout     = "timeout"
	ErrorCodeMaxTurns    = "max_turns"
	ErrorCodeModel       = "model_error"
	ErrorCodeInternal    = "internal"
	// ErrorCodeQuotaExceeded stops a run whose tenant spent its model
	// tokens for the day.
	ErrorCodeQuotaExceeded = "quota_exceeded"
	// ErrorCodeResumeLimit ends a run that its process died under more
	// often than its agent's max_resumes allows: whatever it does takes
	// its process down, and continuing it again would take the next one.
	ErrorCodeResumeLimit = "resume_limit"
	// ErrorCodeGuardDenied ends a run its agent's guard refused to start.
	ErrorCodeGuardDenied = "guard_denied"
)

// Run is one agent turn: from the user's input to the agent's answer,
// with every model and tool call in between.
type Run struct {
	ID             string
	SessionID      string
	State          RunState
	Input          string
	IdempotencyKey string
	CreatedAt      time.Time
	StartedAt      time.Time // zero until the run leaves the queue
	EndedAt        time.Time // zero until the run ends
	Error          *RunError
	Usage          Usage
	StartSeq       int64 // seq of its RUN_STARTED
	EndSeq         int64 // seq of its RUN_FINISHED or RUN_ERROR
	// Version counts the updates of the record, as Session.Version does.
	Version int64

	RunExt
}

// RunExt holds the run's fields that no query selects by: a store keeps
// them as one JSON document, so adding one needs no migration.
type RunExt struct {
	// IfBusy is the busy policy the run was posted with, when a run was
	// active: "queue", "interrupt" or "steer".
	IfBusy string `json:"if_busy,omitempty"`
	// SteeredInto is the run this one's input joined, for a steer that
	// reached the active run before its next model call.
	SteeredInto string `json:"steered_into,omitempty"`
	// CancelRequested asks the replica running the run to cancel it.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Decisions are approval decisions made for the run's tool calls, in
	// the order they were made; the run applies each once.
	Decisions []Decision `json:"decisions,omitempty"`
	// Model is the model the run used.
	Model string `json:"model,omitempty"`
	// TraceParent is the W3C traceparent of the request that accepted the
	// run, when tracing is on: the run's spans, whichever process makes
	// them, are children of that request's span.
	TraceParent string `json:"trace_parent,omitempty"`
	// Overrides are the model settings chosen for this run alone.
	Overrides *Overrides `json:"overrides,omitempty"`
	// Kind is RunKindCompaction for a run that compacts the history on
	// demand instead of answering an input, RunKindClear for one that
	// clears it; "" for an ordinary run.
	Kind string `json:"kind,omitempty"`
	// ClearMemory, on a RunKindClear run, says the session's memory goes
	// with its history.
	ClearMemory bool `json:"clear_memory,omitempty"`
	// UserMessageID is the id the client gave the run's input message
	// (AG-UI clients name their messages); "" lets kerneld choose.
	UserMessageID string `json:"user_message_id,omitempty"`
	// Context is ambient information for this run alone, added to its
	// system prompt (AG-UI RunAgentInput.context).
	Context []ContextEntry `json:"context,omitempty"`
	// AgentState, when set, becomes the session's AG-UI state as the run
	// starts, and the run's STATE_SNAPSHOT sends it back.
	AgentState json.RawMessage `json:"agent_state,omitempty"`
	// ClientTools are tools the client offers this run beside the agent's
	// (AG-UI RunAgentInput.tools). kerneld never runs them: a call of one
	// ends the run, and the client answers it in the next run's input.
	ClientTools []ClientTool `json:"client_tools,omitempty"`
	// ToolResults answer client tool calls of an earlier run: they start
	// this run, stored as the tool messages of those calls.
	ToolResults []ToolResult `json:"tool_results,omitempty"`

	// What a run needs to be continued by another process (see
	// ResumeCrash); its history and its log say the rest.

	// Resumes counts the times the run was continued by a process other
	// than the one that ran it.
	Resumes int `json:"resumes,omitempty"`
	// Crashes counts the resumes that followed a process dying under the
	// running run (ResumeCrash, ResumeTakeover): the agent's max_resumes
	// bounds them, so that a run whose step kills its process cannot take
	// every next process down too.
	Crashes int `json:"crashes,omitempty"`
	// Handoff says why the process that ran the run let it go unfinished
	// (ResumeShutdown, ResumeStoreOutage), for whoever continues it; ""
	// while a process runs it, and after a crash.
	Handoff string `json:"handoff,omitempty"`
	// ModelUsage is the usage of the run's recorded model calls, per model,
	// saved with Usage when a model call asks for tools, so that a
	// continued run reports what it spent before it was cut.
	ModelUsage []ModelUsage `json:"model_usage,omitempty"`

	// Images are the pictures the run's input carries, after its text.
	Images []ImageRef `json:"images,omitempty"`
	// Source says where the run's input came from: the route or client
	// that posted it (RunSourceAPI, ...), RunSourceSchedule for a
	// schedule's firing, RunSourceChildResult for a background child's
	// answer; "" for a run kerneld started itself (a child session's, a
	// compaction) or one recorded before runs said.
	Source string `json:"source,omitempty"`
	// Background marks the run of a child session spawned with wait:
	// false: when it ends, its answer goes to the parent session as a
	// child_result input.
	Background bool `json:"background,omitempty"`
	// ChildResult, on a run whose Source is RunSourceChildResult, names
	// the child run whose end its input reports.
	ChildResult *ChildResult `json:"child_result,omitempty"`
	// Agent is the agent that runs the run when it is not the session's
	// own: another agent taking a turn on the conversation.
	Agent string `json:"agent,omitempty"`
}

// ChildResult is how a background child's run ended, as its parent
// session hears of it.
type ChildResult struct {
	SessionID string   `json:"session_id"`
	RunID     string   `json:"run_id"`
	Agent     string   `json:"agent"`
	State     RunState `json:"state"`
	Answer    string   `json:"answer,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Why a run was continued: the reason of its kerneld.run.resumed event.
const (
	// ResumeCrash: the process running it died; it was continued when
	// kerneld started again on the same store.
	ResumeCrash = "crash"
	// ResumeTakeover: the replica running it died, and another replica
	// took its session once its lease expired.
	ResumeTakeover = "takeover"
	// ResumeShutdown: the process running it shut down and handed it off,
	// at a step boundary or, past its drain budget, mid-step.
	ResumeShutdown = "shutdown"
	// ResumeStoreOutage: the store refused its writes for longer than the
	// lease TTL, so its process let it go until the store answered again.
	ResumeStoreOutage = "store_outage"
)

// Sources of the runs clients post: the route, or for the REST routes
// the client that says which it is.
const (
	RunSourceAPI     = "api"
	RunSourceConsole = "console"
	RunSourceCLI     = "cli"
	RunSourceAGUI    = "agui"
	RunSourceAISDK   = "ai_sdk"
)

// RunSourceSchedule is the Source of a run a schedule posted.
const RunSourceSchedule = "schedule"

// RunSourceChildResult is the Source of a run whose input is the answer
// of a background child (spawn_agent with wait: false).
const RunSourceChildResult = "child_result"

// ClientTool is a tool a client offers a run and runs itself.
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema of the arguments
}

// ToolResult is a client's answer to one of its tools' calls.
type ToolResult struct {
	MessageID  string `json:"message_id"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// ContextEntry is one named piece of context a client gave a run.
type ContextEntry struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// RunKindCompaction is the Kind of a run started by POST
// /sessions/{id}/compact.
const RunKindCompaction = "compaction"

// RunKindClear is the Kind of a run started by POST /sessions/{id}/clear:
// it empties the history the model sees, and has no input.
const RunKindClear = "clear"

// Decision is a person's answer to a tool call awaiting approval.
type Decision struct {
	ToolCallID string    `json:"tool_call_id"`
	Approve    bool      `json:"approve"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
	// Always, on an approval, approves the tool's later calls in the
	// session too; only those with the same arguments when SameArguments.
	Always        bool `json:"always,omitempty"`
	SameArguments bool `json:"same_arguments,omitempty"`
}

// Clone returns a copy of r sharing no memory with it.
func (r Run) Clone() Run {
	if r.Error != nil {
		e := *r.Error
		r.Error = &e
	}
	r.Decisions = slices.Clone(r.Decisions)
	r.Overrides = r.Overrides.Clone()
	r.Context = slices.Clone(r.Context)
	r.AgentState = slices.Clone(r.AgentState)
	r.ModelUsage = slices.Clone(r.ModelUsage)
	r.Images = cloneImageRefs(r.Images)
	if r.ChildResult != nil {
		c := *r.ChildResult
		r.ChildResult = &c
	}
	return r
}

// Decided returns the decision made for tool call id, if any.
func (r *Run) Decided(toolCallID string) (Decision, bool) {
	for _, d := range r.Decisions {
		if d.ToolCallID == toolCallID {
			return d, true
		}
	}
	return Decision{}, false
}

// RunQuery selects a session's runs in a listing, newest (most recently
// created) first.
type RunQuery struct {
	// Before is a run id: only runs created before it are listed.
	Before string
	Limit  int        // at most this many; 0 means no limit
	States []RunState // only runs in one of these; empty means any
}

// Transition moves r to state to at time now, or reports why it cannot.
func (r *Run) Transition(to RunState, now time.Time) error {
	if !r.State.CanBecome(to) {
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeInvalidTransition,
			"run %s cannot go from %s to %s", r.ID, r.State, to)
	}
	r.State = to
	switch {
	case to == RunRunning && r.StartedAt.IsZero():
		r.StartedAt = now
	case to.Terminal():
		r.EndedAt = now
	}
	return nil
}
