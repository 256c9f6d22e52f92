package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// freshChatMessages compares a chat request's messages with the stored
// history and returns the messages kerneld lacks: at most one, a new
// user message, last. The client's copy must hold every stored user
// message, in order and unedited, each followed by at most its answer
// (answerPrefix + its id): an edit, a removal, a reordering or an
// assistant message kerneld did not write is a conflict pointing to fork.
func freshChatMessages(msgs []chatMessage, history []session.Message) ([]chatMessage, error) {
	if len(msgs) == 0 {
		return nil, errdefs.Invalid("messages", "empty: send the chat's messages, the new user message last")
	}
	var stored []session.Message
	for _, m := range history {
		if m.Role == session.RoleUser {
			stored = append(stored, m)
		}
	}
	seen := 0 // stored user messages matched so far
	for i, m := range msgs {
		switch {
		case m.role == "assistant":
			if seen == 0 || m.id != answerPrefix+stored[seen-1].ID {
				return nil, chatConflict("messages[%d] (%s) is not in the chat's history: kerneld writes the answers", m.index, m.id)
			}
		case m.role != "user":
			return nil, chatConflict("messages[%d] (%s, %s) is not in the chat's history: an agent's instructions are its system prompt", m.index, m.id, m.role)
		case seen < len(stored) && m.id == stored[seen].ID:
			if m.text != stored[seen].Content {
				return nil, chatConflict("messages[%d] (%s) was edited", m.index, m.id)
			}
			seen++
		case knownUser(stored, m.id):
			return nil, chatConflict("messages[%d] (%s) is out of place: messages before it were removed or reordered", m.index, m.id)
		case seen < len(stored):
			return nil, chatConflict("the chat's history has %d user messages the client does not: reload it (GET /sessions/{id}/transcript)", len(stored)-seen)
		case i != len(msgs)-1:
			return nil, chatConflict("messages[%d] (%s) is followed by other messages: send one new user message, last", m.index, m.id)
		default:
			return []chatMessage{m}, nil
		}
	}
	if seen < len(stored) {
		return nil, chatConflict("the chat's history has %d user messages the client does not: reload it (GET /sessions/{id}/transcript)", len(stored)-seen)
	}
	return nil, nil
}

// knownUser reports whether id is one of the stored user messages.
func knownUser(stored []session.Message, id string) bool {
	for _, m := range stored {
		if m.ID == id {
			return true
		}
	}
	return false
}

// chatConflict is a 409 saying how a chat's messages contradict the
// stored history.
func chatConflict(format string, args ...any) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeHistoryConflict,
		"messages contradict the chat's history: "+format+
			"; kerneld keeps the history, so send it as received plus the new user message (to edit a message, fork the chat: POST /sessions/{id}/fork; to answer again, regenerate)", args...)
}

// answerApprovals decides the approvals the chat's run waits for with
// the answers on the tool parts of last, the client's copy of the
// answer, and streams the rest of that answer. Every pending approval
// must be answered, and only those.
func (s *Server) answerApprovals(w http.ResponseWriter, r *http.Request, sess session.Session, last chatMessage) error {
	if sess.ActiveRunID == "" {
		return approvalMismatch(last.approvals[0], "the chat has no run waiting for approval")
	}
	run, err := s.kernel.GetRun(r.Context(), sess.ID, sess.ActiveRunID)
	if err != nil {
		return err
	}
	answerID, err := s.answerIDOf(r, run)
	if err != nil {
		return err
	}
	if last.id != answerID {
		return approvalMismatch(last.approvals[0], fmt.Sprintf("the run waiting for approval is the answer %s, not %s", answerID, last.id))
	}
	pending, err := s.pendingApprovals(r.Context(), run)
	if err != nil {
		return err
	}
	if err := matchApprovals(last.approvals, pending); err != nil {
		return err
	}
	for _, a := range last.approvals {
		if _, err := s.kernel.Decide(r.Context(), sess.ID, run.ID, a.toolCallID, a.approved, a.reason); err != nil {
			return err
		}
	}
	var after int64
	for _, a := range pending {
		after = max(after, a.RequestSeq)
	}
	return s.streamChat(w, r, run, after, answerID)
}

// matchApprovals checks that answers decide exactly the pending
// approvals.
func matchApprovals(answers []chatApproval, pending []kernel.Approval) error {
	open := make(map[string]bool, len(pending))
	for _, p := range pending {
		open[p.ToolCallID] = true
	}
	for _, a := range answers {
		switch {
		case a.approvalID != a.toolCallID:
			return approvalMismatch(a, fmt.Sprintf("approval %q was asked for tool call %q, not %q", a.approvalID, a.approvalID, a.toolCallID))
		case !open[a.approvalID]:
			return approvalMismatch(a, fmt.Sprintf("approval %q is not pending (answered already, or never asked)", a.approvalID))
		}
		delete(open, a.approvalID)
	}
	var missing []string
	for _, p := range pending {
		if open[p.ToolCallID] {
			missing = append(missing, p.ToolCallID)
		}
	}
	if len(missing) > 0 {
		return errdefs.Invalid(answers[0].field, "every pending approval needs an answer; unanswered: "+strings.Join(missing, ", "))
	}
	return nil
}

// approvalMismatch is a 409 for an answer that does not fit what the
// chat waits for.
func approvalMismatch(a chatApproval, why string) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeApprovalNotPending, "%s answers an approval, but %s", a.field, why)
}
