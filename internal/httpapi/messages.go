package httpapi

import (
	"net/http"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// messageListResponse is the answer of GET /sessions/{id}/messages: a page
// of the history, and the context the model sees beside it.
type messageListResponse struct {
	listResponse[messageResponse]
	Context conversationContext `json:"context"`
}

// conversationContext is what the model sees before the history: the
// agent's system prompt, the session's own instructions, and the two as
// one system prompt (memory and a run's context are added per call).
type conversationContext struct {
	SystemPrompt *string `json:"system_prompt"`
	Instructions *string `json:"instructions"`
	System       *string `json:"system"`
}

// handleMessageList handles "GET /sessions/{id}/messages".
func (s *Server) handleMessageList(w http.ResponseWriter, r *http.Request) error {
	page, err := pageRequest(r)
	if err != nil {
		return err
	}
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	p, err := s.kernel.Messages(r.Context(), r.PathValue("id"), page)
	if err != nil {
		return err
	}
	out := messageListResponse{listResponse: toList(p, toMessageResponse)}
	out.Context.Instructions = nullable(sess.Instructions)
	if spec, err := s.kernel.Agent(sess.Agent); err == nil { // an agent no longer configured has none to show
		out.Context.SystemPrompt = &spec.SystemPrompt
		system := kernel.SessionSystemPrompt(spec, sess)
		out.Context.System = &system
	}
	return writeJSON(w, http.StatusOK, out)
}

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
	Images     []imageRefResponse `json:"images,omitempty"`
	ToolCalls  []toolCallResponse `json:"tool_calls"`
	ToolCallID *string            `json:"tool_call_id"`
	IsError    bool               `json:"is_error"`
	Compaction *compactionBody    `json:"compaction"`
	CreatedAt  time.Time          `json:"created_at"`
	Agent      string             `json:"agent,omitempty"`
}

// compactionBody describes a compaction entry of the history.
type compactionBody struct {
	FirstKeptPosition  int64  `json:"first_kept_position"`
	TokensBefore       int64  `json:"tokens_before"`
	TokensAfter        int64  `json:"tokens_after"`
	MessagesSummarized int    `json:"messages_summarized"`
	Model              string `json:"model"`
	Cleared            bool   `json:"cleared"`
}

func toMessageResponse(m session.Message) messageResponse {
	out := messageResponse{
		ID: m.ID, Position: m.Position, RunID: m.RunID, Role: m.Role, Content: m.Content,
		ToolCalls: make([]toolCallResponse, len(m.ToolCalls)), ToolCallID: nullable(m.ToolCallID),
		IsError: m.IsError, CreatedAt: m.CreatedAt.UTC(), Agent: m.Agent,
	}
	for i, c := range m.ToolCalls {
		out.ToolCalls[i] = toolCallResponse{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	for _, ref := range m.Images {
		out.Images = append(out.Images, toImageRefResponse(m.SessionID, ref))
	}
	if c := m.Compaction; c != nil {
		out.Compaction = &compactionBody{
			FirstKeptPosition: c.FirstKept, TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter,
			MessagesSummarized: c.Messages, Model: c.Model, Cleared: c.Cleared,
		}
	}
	return out
}
