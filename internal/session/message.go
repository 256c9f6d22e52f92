package session

import "time"

// Role is who a message is from.
type Role string

// Message roles, as the model sees them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	// RoleCompaction marks a compaction entry: its Content is the summary
	// of the messages before Compaction.FirstKept. It stays in the history
	// where it was made; the model sees it in place of what it summarises.
	RoleCompaction Role = "compaction"
)

// Compaction describes a compaction entry.
type Compaction struct {
	// Position is the compaction entry's own position in the history.
	Position int64 `json:"position"`
	// Summary is what the model wrote about the messages it replaces.
	Summary string `json:"summary,omitempty"`
	// FirstKept is the position of the first message the model still
	// sees as it is.
	FirstKept int64 `json:"first_kept"`
	// TokensBefore and TokensAfter estimate the history the model sees,
	// before and after compacting.
	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
	// Messages counts the messages the summary replaces.
	Messages int `json:"messages"`
	// Model wrote the summary.
	Model string `json:"model,omitempty"`
	// Cleared marks the entry of a clear: it has no summary, and nothing
	// before it is shown or sent to the model again.
	Cleared bool `json:"cleared,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, as the model produced it
}

// Message is one entry of the conversation history the model sees. The
// history is a projection of the event log, written once per completed
// message so building a request never replays token deltas.
type Message struct {
	ID        string // the AG-UI messageId of the events that carried it
	SessionID string
	Position  int64 // 1, 2, 3… per session, assigned by the store on append
	RunID     string
	Role      Role
	Content   string
	// Images are the pictures a user message carries, in order, after
	// its text; nil for none.
	Images     []ImageRef `json:",omitempty"`
	ToolCalls  []ToolCall
	ToolCallID string // for RoleTool: the call this answers
	IsError    bool   // for RoleTool: the tool failed
	// Compaction describes a RoleCompaction entry; nil for other roles.
	Compaction *Compaction `json:",omitempty"`
	CreatedAt  time.Time
	// Agent is the agent that wrote an assistant message; "" for other
	// roles and for messages older than the field.
	Agent string `json:",omitempty"`
}

// MemoryEntry is one key of a session's memory.
type MemoryEntry struct {
	SessionID string
	Key       string
	Value     []byte // JSON text
	UpdatedAt time.Time
}
