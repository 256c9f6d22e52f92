package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// handleAISDKChat handles "POST /agents/{name}/ai-sdk": one request of
// the AI SDK's DefaultChatTransport. The chat is the session of the
// caller's tenant with the chat's id, created for agent {name} on first
// use. The request asks for a new answer (a new user message), for the
// rest of an answer waiting for approvals (the answers on its tool
// parts), or for an answer again (trigger regenerate-message). The
// response is that run as a UI message stream. Every problem is found
// before the first byte of the stream.
func (s *Server) handleAISDKChat(w http.ResponseWriter, r *http.Request) error {
	in, err := readChat(r)
	if err != nil {
		return err
	}
	sess, _, err := s.kernel.EnsureSession(r.Context(), kernel.CreateSession{Agent: r.PathValue("name"), ID: in.id})
	if err != nil {
		return err
	}
	root := sess
	if sess, err = s.chatSession(r.Context(), sess); err != nil {
		return err
	}
	history, err := s.history(r, sess.ID)
	if err != nil {
		return err
	}
	if in.trigger == triggerRegenerate {
		return s.regenerateChat(w, r, root, sess, in, history)
	}
	fresh, err := freshChatMessages(in.messages, history)
	if err != nil {
		return err
	}
	last := in.messages[len(in.messages)-1] // freshChatMessages refuses an empty list
	switch {
	case len(fresh) > 0:
		return s.startChatRun(w, r, sess, fresh[0])
	case len(last.approvals) > 0:
		return s.answerApprovals(w, r, sess, last)
	case last.role == "user":
		return s.replayChatRun(w, r, sess, last, history)
	}
	return errdefs.Invalid("messages", "nothing new: the last message must be a new user message, or an assistant message with answered approvals")
}

// startChatRun runs the chat's new user message and streams the run.
func (s *Server) startChatRun(w http.ResponseWriter, r *http.Request, sess session.Session, input chatMessage) error {
	if !session.ValidClientID(input.id) {
		return errdefs.Invalid(fieldOf(input, ".id"), "a new user message's id must be 1 to 128 characters of [A-Za-z0-9._:-]")
	}
	if strings.TrimSpace(input.text) == "" {
		return errdefs.Invalid(fieldOf(input, ".parts"), "no text: a user message needs a text part")
	}
	run, _, err := s.kernel.Run(r.Context(), sess.ID, kernel.RunRequest{
		Input:          input.text,
		IdempotencyKey: "ai-sdk:" + input.id, // a retry racing this request finds this run
		AGUI:           kernel.AGUIRun{UserMessageID: input.id},
		Source:         session.RunSourceAISDK,
	})
	if err != nil {
		return err
	}
	after, err := s.streamStart(r, run)
	if err != nil {
		return err
	}
	return s.streamChat(w, r, run, after, answerPrefix+input.id)
}

// replayChatRun answers a request whose last message is a user message
// kerneld has: a retry of the request that sent it. It streams that run
// from its start.
func (s *Server) replayChatRun(w http.ResponseWriter, r *http.Request, sess session.Session, last chatMessage, history []session.Message) error {
	for _, m := range history {
		if m.ID != last.id || m.Role != session.RoleUser {
			continue
		}
		run, err := s.kernel.GetRun(r.Context(), sess.ID, m.RunID)
		if err != nil || run.StartSeq == 0 {
			break // a fork's copy: the run that answered it is another session's
		}
		w.Header().Set("Idempotent-Replayed", "true")
		return s.streamChat(w, r, run, run.StartSeq-1, answerPrefix+last.id)
	}
	return errdefs.Invalid(fieldOf(last, ""), "nothing new: this user message was answered already; send a new one, or regenerate the answer")
}

// streamChat streams run, from the event after seq after, as the UI
// message stream of the answer answerID.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, run session.Run, after int64, answerID string) error {
	w.Header().Set("X-Vercel-AI-UI-Message-Stream", "v1")
	w.Header().Set("Location", "/sessions/"+session.PublicID(run.SessionID)+"/runs/"+run.ID)
	req := streamRequest{sessionID: run.SessionID, after: after, runID: run.ID, uiView: s.newUIView(run, answerID)}
	return s.streams.serve(w, r, s.kernel, req)
}

// handleAISDKStream handles "GET /agents/{name}/ai-sdk/{id}/stream", the
// AI SDK's reconnectToStream: the chat's active run as a UI message
// stream from its start, or 204 when no run is active (or no such chat
// exists yet: a new page asks before its first message).
func (s *Server) handleAISDKStream(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.kernel.GetSession(r.Context(), r.PathValue("id"))
	switch {
	case errdefs.CodeOf(err) == errdefs.CodeSessionNotFound:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case err != nil:
		return err
	case sess.Agent != r.PathValue("name"):
		return errdefs.New(errdefs.ErrNotFound, errdefs.CodeChatNotFound, "chat %q is not a chat of agent %s", r.PathValue("id"), r.PathValue("name"))
	}
	if sess, err = s.chatSession(r.Context(), sess); err != nil {
		return err
	}
	if sess.ActiveRunID == "" {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	run, err := s.kernel.GetRun(r.Context(), sess.ID, sess.ActiveRunID)
	if err != nil {
		return err
	}
	answerID, err := s.answerIDOf(r, run)
	if err != nil {
		return err
	}
	after, err := s.streamStart(r, run)
	if err != nil {
		return err
	}
	return s.streamChat(w, r, run, after, answerID)
}

// answerIDOf returns the id of the assistant UIMessage that is run's
// answer: named after the user message the run answers.
func (s *Server) answerIDOf(r *http.Request, run session.Run) (string, error) {
	if run.UserMessageID != "" {
		return answerPrefix + run.UserMessageID, nil
	}
	history, err := s.history(r, run.SessionID)
	if err != nil {
		return "", err
	}
	for _, m := range history {
		if m.RunID == run.ID && m.Role == session.RoleUser {
			return answerPrefix + m.ID, nil
		}
	}
	return run.ID, nil // a run with no input of its own
}

// chatSession returns the session that holds the chat whose first
// session is sess: sess itself, or the fork its last regenerated answer
// went on in.
func (s *Server) chatSession(ctx context.Context, sess session.Session) (session.Session, error) {
	head := sess.Metadata[chatSessionKey]
	if head == "" || head == session.PublicID(sess.ID) {
		return sess, nil
	}
	fork, err := s.kernel.GetSession(ctx, head)
	if errdefs.CodeOf(err) == errdefs.CodeSessionNotFound {
		return sess, nil // the fork was deleted: the chat is its first session again
	}
	return fork, err
}

// fieldOf names a field of a chat message for a problem.
func fieldOf(m chatMessage, field string) string {
	return "messages[" + strconv.Itoa(m.index) + "]" + field
}
