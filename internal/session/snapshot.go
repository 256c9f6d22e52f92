package session

import (
	"encoding/json"
	"strconv"
)

// aguiMessage is a Message as AG-UI 1.0 writes it in MESSAGES_SNAPSHOT:
// camelCase, optional members absent rather than empty.
type aguiMessage struct {
	ID         string          `json:"id"`
	Role       Role            `json:"role"`
	Content    *string         `json:"content,omitempty"`
	ToolCalls  []aguiToolCall  `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

type aguiToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"` // always "function"
	Function aguiFunctionCall `json:"function"`
}

type aguiFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// MessagesSnapshot replaces a client's view of the conversation with msgs,
// oldest first. A tool message of a failed call says so in
// metadata.kerneld.isError, as its TOOL_CALL_RESULT did.
func MessagesSnapshot(msgs []Message) Event {
	out := make([]aguiMessage, len(msgs))
	for i, m := range msgs {
		out[i] = toAGUIMessage(m)
	}
	b, err := json.Marshal(out)
	if err != nil {
		b = []byte("[]") // plain strings and slices always marshal
	}
	return newObject(EventMessagesSnapshot).raw("messages", b).event(EventMessagesSnapshot)
}

func toAGUIMessage(m Message) aguiMessage {
	out := aguiMessage{ID: m.ID, Role: m.Role, ToolCallID: m.ToolCallID}
	// AG-UI requires content on every role but assistant, where a turn of
	// tool calls alone has none.
	if m.Content != "" || m.Role != RoleAssistant {
		content := m.Content
		out.Content = &content
	}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, aguiToolCall{ID: c.ID, Type: "function",
			Function: aguiFunctionCall{Name: c.Name, Arguments: c.Arguments}})
	}
	if m.IsError {
		out.Metadata = json.RawMessage(`{"kerneld":{"isError":true}}`)
	}
	return out
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
