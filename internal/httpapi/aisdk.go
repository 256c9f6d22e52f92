package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// The AI SDK route serves apps built on the Vercel AI SDK (`ai`,
// `@ai-sdk/react`'s useChat): POST /agents/{name}/ai-sdk takes what its
// DefaultChatTransport sends and answers with the run as a UI message
// stream; GET …/ai-sdk/{id}/stream is the transport's reconnectToStream.
//
// The chat id is the session, as the AG-UI route's threadId is. kerneld
// keeps the history, so of the messages a request carries it takes what
// it lacks: the new user message, or the answers to the approvals the
// run waits for. A run's answer is one assistant UIMessage, with the id
// answerPrefix + the id of the user message it answers: known before the
// answer's first token, and the same in every copy of the history (a
// fork keeps message ids).

// answerPrefix starts the id of the assistant UIMessage answering a user
// message.
const answerPrefix = "answer:"

// chatSessionKey is the metadata entry of a chat's first session naming
// the session that holds the chat now: regenerating an answer forks the
// history before it, and the chat goes on in the fork.
const chatSessionKey = "ai_sdk_session"

// chatRequest is the body DefaultChatTransport posts: {id, messages,
// trigger, messageId} plus the app's own members, which kerneld ignores.
type chatRequest struct {
	ID        *string           `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   *string           `json:"trigger"`
	MessageID *string           `json:"messageId"`
}

// The triggers DefaultChatTransport sends.
const (
	triggerSubmit     = "submit-message"
	triggerRegenerate = "regenerate-message"
)

// chat is a chatRequest, checked and read.
type chat struct {
	id, trigger, messageID string
	messages               []chatMessage
}

// chatMessage is what kerneld reads of a UIMessage.
type chatMessage struct {
	index     int
	id, role  string
	text      string         // a user message's text parts, joined
	approvals []chatApproval // an assistant message's answered approvals
}

// chatApproval is a tool part in state approval-responded: the client's
// answer to an approval request, not yet sent to kerneld.
type chatApproval struct {
	field                  string // messages[i].parts[j], for problems
	toolCallID, approvalID string
	approved               bool
	reason                 string
}

// readChat reads and checks a chat request. Like the AI SDK's own
// schemas it is loose: members kerneld does not read are ignored.
func readChat(r *http.Request) (chat, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return chat{}, readError(err)
	}
	var in chatRequest
	if err := readJSON(body, &in, looseJSON); err != nil {
		return chat{}, err
	}
	return in.check()
}

// check validates in, collecting a problem per field.
func (in chatRequest) check() (chat, error) {
	var v *errdefs.ValidationError
	var out chat
	out.id, v = clientIDField(v, "id", in.ID)
	switch {
	case in.Trigger == nil:
		v = v.Add("trigger", "required")
	case *in.Trigger != triggerSubmit && *in.Trigger != triggerRegenerate:
		v = v.Add("trigger", `must be "submit-message" or "regenerate-message"`)
	default:
		out.trigger = *in.Trigger
	}
	if in.MessageID != nil {
		out.messageID = *in.MessageID
	}
	if out.trigger == triggerRegenerate && out.messageID == "" {
		v = v.Add("messageId", "required to regenerate: the id of the message to answer again")
	}
	if in.Messages == nil {
		v = v.Add("messages", "required")
	}
	for i, raw := range in.Messages {
		m, err := readUIMessage(i, raw)
		if err != nil {
			v = v.Add(err.field, err.problem)
			continue
		}
		out.messages = append(out.messages, m)
	}
	return out, v.Err()
}

// uiMessageIn is the part of a UIMessage kerneld reads.
type uiMessageIn struct {
	ID    *string           `json:"id"`
	Role  *string           `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

// uiPartIn is the part of a message part kerneld reads.
type uiPartIn struct {
	Type       string  `json:"type"`
	Text       *string `json:"text"`
	ToolCallID string  `json:"toolCallId"`
	State      string  `json:"state"`
	Approval   *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// readUIMessage reads messages[i].
func readUIMessage(i int, raw json.RawMessage) (chatMessage, *fieldProblem) {
	at := func(f string) string { return fmt.Sprintf("messages[%d]%s", i, f) }
	var m uiMessageIn
	if err := unmarshalPart(raw, &m, looseJSON); err != nil {
		return chatMessage{}, &fieldProblem{at(""), "must be a UIMessage object: {id, role, parts}"}
	}
	switch {
	case m.ID == nil || *m.ID == "" || len(*m.ID) > 256:
		return chatMessage{}, &fieldProblem{at(".id"), "must be a string of 1 to 256 bytes"}
	case m.Role == nil || (*m.Role != "user" && *m.Role != "assistant" && *m.Role != "system"):
		return chatMessage{}, &fieldProblem{at(".role"), `must be "user", "assistant" or "system"`}
	case m.Parts == nil:
		return chatMessage{}, &fieldProblem{at(".parts"), "required"}
	}
	out := chatMessage{index: i, id: *m.ID, role: *m.Role}
	var text strings.Builder
	for j, rawPart := range m.Parts {
		var p uiPartIn
		if err := unmarshalPart(rawPart, &p, looseJSON); err != nil || p.Type == "" {
			return chatMessage{}, &fieldProblem{at(fmt.Sprintf(".parts[%d]", j)), "must be a message part object with a type"}
		}
		field := at(fmt.Sprintf(".parts[%d]", j))
		switch {
		case out.role != "assistant" && p.Type == "text" && p.Text != nil:
			text.WriteString(*p.Text)
		case out.role == "user" && p.Type == "file":
			return chatMessage{}, &fieldProblem{field, "kerneld takes text only: send files' contents as text parts"}
		case out.role == "assistant" && p.State == "approval-responded" && isToolPart(p.Type):
			a, problem := readApproval(field, p)
			if problem != nil {
				return chatMessage{}, problem
			}
			out.approvals = append(out.approvals, a)
		}
	}
	out.text = text.String()
	return out, nil
}

// isToolPart reports whether a part type is a tool call's.
func isToolPart(typ string) bool { return strings.HasPrefix(typ, "tool-") || typ == "dynamic-tool" }

// readApproval reads a tool part in state approval-responded.
func readApproval(field string, p uiPartIn) (chatApproval, *fieldProblem) {
	switch {
	case p.ToolCallID == "":
		return chatApproval{}, &fieldProblem{field + ".toolCallId", "required"}
	case p.Approval == nil || p.Approval.ID == "":
		return chatApproval{}, &fieldProblem{field + ".approval.id", "required"}
	case p.Approval.Approved == nil:
		return chatApproval{}, &fieldProblem{field + ".approval.approved", "required: true or false"}
	}
	return chatApproval{field: field, toolCallID: p.ToolCallID, approvalID: p.Approval.ID,
		approved: *p.Approval.Approved, reason: p.Approval.Reason}, nil
}
