package httpapi

import (
	"net/http"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// uiMessageOut is an AI SDK UIMessage: {id, role, parts}.
type uiMessageOut struct {
	ID    string           `json:"id"`
	Role  string           `json:"role"`
	Parts []map[string]any `json:"parts"`
}

// handleSessionTranscript handles "GET /sessions/{id}/transcript": the
// history as the AI SDK's UIMessage[], which an app hands to
// useChat({messages}). User messages keep their stored ids; the messages
// and tool results of the run answering one form one assistant message
// (answerPrefix + the user message's id), a step per model call, each
// tool part in its final state. Reasoning is not in the history, so not
// here.
func (s *Server) handleSessionTranscript(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	history, err := s.history(r, id)
	if err != nil {
		return err
	}
	approvals := map[string]kernel.Approval{}
	seen := map[string]bool{}
	for _, m := range history {
		if len(m.ToolCalls) == 0 || seen[m.RunID] {
			continue
		}
		seen[m.RunID] = true
		list, err := s.kernel.Approvals(r.Context(), id, m.RunID)
		if err != nil {
			return err
		}
		for _, a := range list {
			approvals[a.ToolCallID] = a
		}
	}
	return writeJSON(w, http.StatusOK, transcript(history, approvals))
}

// transcript folds history into UIMessages; approvals are the approvals
// of its tool calls, by call id.
func transcript(history []session.Message, approvals map[string]kernel.Approval) []uiMessageOut {
	out := []uiMessageOut{}
	var answer *uiMessageOut
	tools := map[string]map[string]any{} // the tool parts of answer, by call id
	flush := func() {
		if answer != nil && len(answer.Parts) > 0 {
			out = append(out, *answer)
		}
		answer, tools = nil, map[string]map[string]any{}
	}
	for _, m := range history {
		switch m.Role {
		case session.RoleUser:
			flush()
			out = append(out, uiMessageOut{ID: m.ID, Role: "user", Parts: []map[string]any{{"type": "text", "text": m.Content}}})
			answer = &uiMessageOut{ID: answerPrefix + m.ID, Role: "assistant"}
		case session.RoleAssistant:
			if answer == nil {
				answer = &uiMessageOut{ID: m.ID, Role: "assistant"} // a run without input of its own
			}
			answer.Parts = append(answer.Parts, stepParts(m, approvals, tools)...)
		case session.RoleTool:
			if part := tools[m.ToolCallID]; part != nil {
				settleToolPart(part, m, approvals[m.ToolCallID])
			}
		}
	}
	flush()
	return out
}

// stepParts returns the parts of one model call's assistant message: a
// step start, its text, its tool calls (as they were called; their
// results settle them), which it records in tools.
func stepParts(m session.Message, approvals map[string]kernel.Approval, tools map[string]map[string]any) []map[string]any {
	parts := []map[string]any{{"type": "step-start"}}
	if m.Content != "" {
		parts = append(parts, map[string]any{"type": "text", "text": m.Content, "state": "done"})
	}
	for _, c := range m.ToolCalls {
		part := map[string]any{"type": "tool-" + c.Name, "toolCallId": c.ID, "state": "input-available", "input": toolInput(c.Arguments)}
		switch a, ok := approvals[c.ID]; {
		case !ok:
		case a.State == kernel.ApprovalPending:
			part["state"], part["approval"] = "approval-requested", map[string]any{"id": c.ID}
		case a.State == kernel.ApprovalApproved || a.State == kernel.ApprovalDenied:
			part["state"], part["approval"] = "approval-responded", approvalOut(a)
		}
		tools[c.ID] = part
		parts = append(parts, part)
	}
	return parts
}

// settleToolPart gives a tool part the state its result m says.
func settleToolPart(part map[string]any, m session.Message, a kernel.Approval) {
	switch {
	case a.State == kernel.ApprovalDenied:
		part["state"], part["approval"] = "output-denied", approvalOut(a)
		return
	case m.IsError:
		part["state"], part["errorText"] = "output-error", m.Content
	default:
		part["state"], part["output"] = "output-available", toolOutput(m.Content)
	}
	if a.State == kernel.ApprovalApproved {
		part["approval"] = approvalOut(a)
	} else {
		delete(part, "approval")
	}
}

// approvalOut is a decided approval as a tool part holds it.
func approvalOut(a kernel.Approval) map[string]any {
	out := map[string]any{"id": a.ToolCallID, "approved": a.State == kernel.ApprovalApproved}
	if a.Reason != "" {
		out["reason"] = a.Reason
	}
	return out
}
