package httpapi

import (
	"net/http"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// regenerateChat answers again the user message the request's messageId
// names (or whose answer it names), as POST …/runs/{run_id}/regenerate
// does: the history before that message is forked and the same input
// runs in the fork. The chat goes on in the fork: its first session, root,
// names it (chatSessionKey), and the answer keeps its id, so the client's
// copy of the chat stays right. sess is the session holding the chat now.
func (s *Server) regenerateChat(w http.ResponseWriter, r *http.Request, root, sess session.Session, in chat, history []session.Message) error {
	idx := userMessageIndex(history, strings.TrimPrefix(in.messageID, answerPrefix))
	if idx < 0 {
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeMessageNotFound, "messageId %q is not a user message of this chat, nor its answer", in.messageID)
	}
	input := history[idx]
	if fresh, err := freshChatMessages(in.messages, history[:idx+1]); err != nil {
		return err
	} else if len(fresh) > 0 {
		return errdefs.Invalid(fieldOf(fresh[0], ""), "a regenerate request takes no new message")
	}
	fork, run, err := s.regenerate(r, sess, input)
	if err != nil {
		return err
	}
	if err := s.pointChat(r, root, fork); err != nil {
		return err
	}
	after, err := s.streamStart(r, run)
	if err != nil {
		return err
	}
	return s.streamChat(w, r, run, after, answerPrefix+input.ID)
}

// regenerate forks sess before the user message input and runs input
// again in the fork, under the same message id.
func (s *Server) regenerate(r *http.Request, sess session.Session, input session.Message) (session.Session, session.Run, error) {
	req := kernel.RunRequest{Input: input.Content, AGUI: kernel.AGUIRun{UserMessageID: input.ID}, Source: session.RunSourceAISDK}
	if old, err := s.kernel.GetRun(r.Context(), sess.ID, input.RunID); err == nil {
		req.Overrides = old.Overrides.Clone()
	}
	before := input.Position - 1
	fork, err := s.kernel.ForkSession(r.Context(), sess.ID, kernel.ForkRequest{AtMessage: &before})
	if err != nil {
		return session.Session{}, session.Run{}, err
	}
	run, _, err := s.kernel.Run(r.Context(), fork.ID, req)
	if err != nil {
		if derr := s.kernel.DeleteSession(r.Context(), fork.ID, false); derr != nil {
			s.log.Error("remove a fork whose run did not start", "session", fork.ID, "err", derr)
		}
		return session.Session{}, session.Run{}, err
	}
	return fork, run, nil
}

// pointChat makes fork the session that holds the chat whose first
// session is root.
func (s *Server) pointChat(r *http.Request, root, fork session.Session) error {
	id := session.PublicID(fork.ID)
	if _, err := s.kernel.UpdateSession(r.Context(), root.ID, kernel.SessionUpdate{Metadata: map[string]*string{chatSessionKey: &id}}); err != nil {
		return err
	}
	if _, copied := fork.Metadata[chatSessionKey]; !copied {
		return nil
	}
	// The fork copied its source's metadata, pointer included: only the
	// chat's first session points.
	_, err := s.kernel.UpdateSession(r.Context(), fork.ID, kernel.SessionUpdate{Metadata: map[string]*string{chatSessionKey: nil}})
	return err
}

// userMessageIndex returns the index in history of the user message id,
// or -1.
func userMessageIndex(history []session.Message, id string) int {
	for i, m := range history {
		if m.ID == id && m.Role == session.RoleUser {
			return i
		}
	}
	return -1
}
