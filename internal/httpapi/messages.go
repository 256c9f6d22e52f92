package httpapi

import (
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

type toolCallResponse struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type messageResponse struct {
	ID         string             `json:"id"`
	Position   int64              `json:"position"`
	RunID      string             `json:"run_id"`
	Role       session.Role       `json:"role"`
	Content    string             `json:"content"`
	ToolCalls  []toolCallResponse `json:"tool_calls"`
	ToolCallID *string            `json:"tool_call_id"`
	IsError    bool               `json:"is_error"`
	CreatedAt  time.Time          `json:"created_at"`
}

func toMessageResponse(m session.Message) messageResponse {
	out := messageResponse{
		ID: m.ID, Position: m.Position, RunID: m.RunID, Role: m.Role, Content: m.Content,
		ToolCalls: make([]toolCallResponse, len(m.ToolCalls)), ToolCallID: nullable(m.ToolCallID),
		IsError: m.IsError, CreatedAt: m.CreatedAt.UTC(),
	}
	for i, c := range m.ToolCalls {
		out.ToolCalls[i] = toolCallResponse{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	return out
}
