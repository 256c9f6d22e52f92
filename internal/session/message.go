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
)

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
	ID         string // the AG-UI messageId of the events that carried it
	SessionID  string
	Position   int64 // 1, 2, 3… per session, assigned by the store on append
	RunID      string
	Role       Role
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string // for RoleTool: the call this answers
	IsError    bool   // for RoleTool: the tool failed
	CreatedAt  time.Time
}

// MemoryEntry is one key of a session's memory.
type MemoryEntry struct {
	SessionID string
	Key       string
	Value     []byte // JSON text
	UpdatedAt time.Time
}
