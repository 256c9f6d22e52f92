package session

import (
	"encoding/json"
	"strconv"
)

// aguiMessage is a history message in AG-UI 1.0's Message shape (the
// schemas of @ag-ui/core: UserMessage, AssistantMessage, ToolMessage,
// SystemMessage).
type aguiMessage struct {
	ID         string          `json:"id"`
	Role       Role            `json:"role"`
	Content    any             `json:"content,omitempty"` // a string, or content parts (aguiPart)
	ToolCalls  []aguiToolCall  `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Error      string          `json:"error,omitempty"`
	Metadata   aguiMessageMeta `json:"metadata"`
}

type aguiToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"
	Function aguiFunction `json:"function"`
}

type aguiFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// aguiPart is an AG-UI 1.0 content part of a user message: text, or an
// image by URL.
type aguiPart struct {
	Type   string         `json:"type"` // "text" or "image"
	Text   *string        `json:"text,omitempty"`
	Source *aguiURLSource `json:"source,omitempty"`
}

type aguiURLSource struct {
	Type     string `json:"type"` // always "url"
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}

// contentParts returns the content of user message m, which carries
// images, as AG-UI content parts: its text, then each image by URL (where
// kerneld serves the images it keeps, ImagePath; the client's own URL
// otherwise), as the live stream's kerneld.message.images names them.
func contentParts(m *Message) []aguiPart {
	var parts []aguiPart
	if m.Content != "" {
		parts = append(parts, aguiPart{Type: "text", Text: &m.Content})
	}
	for _, ref := range m.Images {
		src := aguiURLSource{Type: "url", Value: ref.URL, MimeType: ref.MediaType}
		if ref.Hash != "" {
			src.Value = ImagePath(m.SessionID, ref.Hash)
		}
		parts = append(parts, aguiPart{Type: "image", Source: &src})
	}
	return parts
}

// ImagePath is the path at which kerneld serves image hash of session
// id ("GET /sessions/{id}/images/{hash}"). Messages name their images by
// it wherever they leave kerneld, so that a client can show them.
func ImagePath(sessionID, hash string) string {
	return "/sessions/" + PublicID(sessionID) + "/images/" + hash
}

// aguiMessageMeta is kerneld's envelope on a message, as on an event.
type aguiMessageMeta struct {
	Kerneld struct {
		RunID   string `json:"runId"`
		IsError bool   `json:"isError,omitempty"`
		Agent   string `json:"agent,omitempty"`
	} `json:"kerneld"`
}

// MessagesSnapshot returns a MESSAGES_SNAPSHOT event holding msgs as AG-UI
// messages. Each message keeps its id, the messageId its events carried,
// so a client that applies the snapshot and then events holds each message
// once. A message's run is in its metadata.kerneld.runId; a failed tool
// result carries its content as error too, and metadata.kerneld.isError;
// an assistant message written by another agent than own, the session's
// agent, names it in metadata.kerneld.agent, as the RUN_STARTED of that
// agent's run does.
func MessagesSnapshot(msgs []Message, own string) Event {
	out := make([]aguiMessage, 0, len(msgs))
	for i := range msgs {
		if msgs[i].Role == RoleCompaction {
			continue // kerneld's own record, which AG-UI has no role for
		}
		out = append(out, toAGUIMessage(&msgs[i], own))
	}
	b, err := json.Marshal(out)
	if err != nil { // strings and slices only: never
		b = []byte("[]")
	}
	return newObject(EventMessagesSnapshot).raw("messages", b).event(EventMessagesSnapshot)
}

func toAGUIMessage(m *Message, own string) aguiMessage {
	a := aguiMessage{ID: m.ID, Role: m.Role, ToolCallID: m.ToolCallID}
	a.Metadata.Kerneld.RunID = m.RunID
	if m.Role == RoleAssistant && m.Agent != own {
		a.Metadata.Kerneld.Agent = m.Agent
	}
	// An assistant turn made only of tool calls has no content; every
	// other role requires it, even empty.
	if m.Role != RoleAssistant || m.Content != "" {
		a.Content = m.Content
	}
	if len(m.Images) > 0 {
		a.Content = contentParts(m)
	}
	for _, c := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, aguiToolCall{ID: c.ID, Type: "function",
			Function: aguiFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if m.Role == RoleTool && m.IsError {
		a.Error, a.Metadata.Kerneld.IsError = m.Content, true
	}
	return a
}

// RunStartedFrom opens a run that branches from parentRunID, a run of
// another thread, as AG-UI marks a fork; "" is a plain RunStarted.
func RunStartedFrom(threadID, runID, parentRunID string) Event {
	return newObject(EventRunStarted).str("threadId", threadID).str("runId", runID).
		optStr("parentRunId", parentRunID).str("protocolVersion", ProtocolVersion).event(EventRunStarted)
}

// ForkMeta is the metadata.kerneld member of a fork's first RUN_STARTED:
// the session it was forked from and the position of the last message it
// kept.
func ForkMeta(sessionID string, position int64) json.RawMessage {
	b := []byte(`{"forkedFrom":{"sessionId":`)
	b = appendString(b, sessionID)
	b = append(b, `,"messagePosition":`...)
	b = strconv.AppendInt(b, position, 10)
	return json.RawMessage(append(b, "}}"...))
}
