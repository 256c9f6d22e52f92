package session

import (
	"bytes"
	"encoding/json"
)

// Delta events carry one piece of a message's text, of its reasoning, or
// of a tool call's arguments. Consecutive deltas of the same message say
// the same as one delta holding their pieces joined, which is what lets a
// run that streams faster than its store commits log one event for a
// burst of tokens (see the kernel's event writer).

// deltaKey returns the member that names what a delta event of type t
// extends, and whether t is a delta event at all.
func deltaKey(t EventType) (string, bool) {
	switch t {
	case EventTextMessageContent, EventReasoningMessageContent:
		return "messageId", true
	case EventToolCallArgs:
		return "toolCallId", true
	}
	return "", false
}

// IsDelta reports whether t carries a piece of a message or tool call.
func (t EventType) IsDelta() bool {
	_, ok := deltaKey(t)
	return ok
}

// DeltaEvent returns the delta event of type t (TEXT_MESSAGE_CONTENT,
// REASONING_MESSAGE_CONTENT or TOOL_CALL_ARGS) extending id by delta, in
// the plain form the kernel emits.
func DeltaEvent(t EventType, id, delta string) Event {
	key, _ := deltaKey(t)
	return newObject(t).str(key, id).str("delta", delta).event(t)
}

// Delta returns what the delta event e extends and its piece, when e is a
// delta event in the plain form DeltaEvent gives: no other members and no
// metadata. Anything more (a subagentRunId, kerneld metadata) is not
// plain, and ok is false: such an event must be logged as it is.
func (e *Event) Delta() (id, delta string, ok bool) {
	key, isDelta := deltaKey(e.Type)
	if !isDelta || len(e.Meta) > 0 {
		return "", "", false
	}
	var v struct {
		MessageID  string `json:"messageId"`
		ToolCallID string `json:"toolCallId"`
		Delta      string `json:"delta"`
	}
	if json.Unmarshal(e.Data, &v) != nil {
		return "", "", false
	}
	id = v.MessageID
	if key == "toolCallId" {
		id = v.ToolCallID
	}
	if !bytes.Equal(DeltaEvent(e.Type, id, v.Delta).Data, e.Data) {
		return "", "", false
	}
	return id, v.Delta, true
}
