package session

import (
	"encoding/json"
	"strconv"
)

// ProtocolVersion is the AG-UI protocol version kerneld speaks.
const ProtocolVersion = "1.0"

// Outcome is how a run that ended with RUN_FINISHED went.
type Outcome string

// RUN_FINISHED outcomes.
const (
	OutcomeSuccess   Outcome = "success"
	OutcomeCancelled Outcome = "cancelled"
)

// Reasons a cancelled run carries in metadata.kerneld.reason.
const (
	ReasonCancelled   = "cancelled"   // POST …/cancel, or the session was closed or deleted
	ReasonInterrupted = "interrupted" // a new input interrupted the run
)

// object builds one AG-UI event object; it starts with its type member.
type object []byte

func newObject(t EventType) object {
	o := make(object, 0, 96)
	o = append(o, `{"type":"`...)
	o = append(o, t...)
	return append(o, '"')
}

func (o object) key(k string) object {
	o = append(o, ',', '"')
	o = append(o, k...)
	return append(o, '"', ':')
}

func (o object) str(k, v string) object { return appendString(o.key(k), v) }

// optStr adds k only when v is not empty: AG-UI optional fields are absent,
// never null or "".
func (o object) optStr(k, v string) object {
	if v == "" {
		return o
	}
	return o.str(k, v)
}

func (o object) raw(k string, v []byte) object { return append(o.key(k), v...) }

func (o object) event(t EventType) Event {
	return Event{Type: t, Data: json.RawMessage(append(o, '}'))}
}

// RunStarted opens a run. threadID is the session's id or store key: the
// event names it by its PublicID.
func RunStarted(threadID, runID string) Event {
	return newObject(EventRunStarted).str("threadId", PublicID(threadID)).str("runId", runID).
		str("protocolVersion", ProtocolVersion).event(EventRunStarted)
}

// RunFinished closes a run that succeeded or was cancelled. A cancelled run
// says why in metadata.kerneld.reason. models, when given, break the usage
// down by model.
func RunFinished(threadID, runID string, outcome Outcome, reason string, usage Usage, models ...ModelUsage) Event {
	return runFinished(threadID, runID, outcome, nil, reason, usage, models)
}

// RunFinishedPending closes a run that succeeded leaving tool calls for
// the client to answer: AG-UI's outcome.pendingToolCallIds names them.
func RunFinishedPending(threadID, runID string, pending []string, usage Usage, models ...ModelUsage) Event {
	return runFinished(threadID, runID, OutcomeSuccess, pending, "", usage, models)
}

func runFinished(threadID, runID string, outcome Outcome, pending []string, reason string, usage Usage, models []ModelUsage) Event {
	o := newObject(EventRunFinished).str("threadId", PublicID(threadID)).str("runId", runID)
	o = append(o.key("outcome"), `{"type":`...)
	o = appendString(o, string(outcome))
	if len(pending) > 0 {
		o = append(o, `,"pendingToolCallIds":[`...)
		for i, id := range pending {
			if i > 0 {
				o = append(o, ',')
			}
			o = appendString(o, id)
		}
		o = append(o, ']')
	}
	o = append(o, '}')
	ev := o.raw("usage", usageMember(usage, models)).event(EventRunFinished)
	if reason != "" {
		ev.Meta = metaString("reason", reason)
	}
	return ev
}

// StateSnapshot carries the session's whole AG-UI state, a JSON value.
func StateSnapshot(state json.RawMessage) Event {
	return newObject(EventStateSnapshot).raw("snapshot", state).event(EventStateSnapshot)
}

// RunErrored closes a run that failed; code is one of the ErrorCode values.
// models, when given, break the usage down by model.
func RunErrored(code, message string, usage Usage, models ...ModelUsage) Event {
	return newObject(EventRunError).str("message", message).str("code", code).
		raw("usage", usageMember(usage, models)).event(EventRunError)
}

func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `[{"inputTokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"outputTokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, u.InputTokens+u.OutputTokens, 10)
	return append(b, "}]"...)
}

// TextMessageStart opens a text message from role.
func TextMessageStart(messageID string, role Role) Event {
	return newObject(EventTextMessageStart).str("messageId", messageID).str("role", string(role)).
		event(EventTextMessageStart)
}

// TextMessageContent carries a piece of a text message; delta must not be empty.
func TextMessageContent(messageID, delta string) Event {
	return newObject(EventTextMessageContent).str("messageId", messageID).str("delta", delta).
		event(EventTextMessageContent)
}

// TextMessageEnd closes a text message.
func TextMessageEnd(messageID string) Event {
	return newObject(EventTextMessageEnd).str("messageId", messageID).event(EventTextMessageEnd)
}

// ReasoningStart opens a reasoning span.
func ReasoningStart(messageID string) Event {
	return newObject(EventReasoningStart).str("messageId", messageID).event(EventReasoningStart)
}

// ReasoningMessageStart opens a reasoning message inside a reasoning span.
func ReasoningMessageStart(messageID string) Event {
	return newObject(EventReasoningMessageStart).str("messageId", messageID).str("role", "reasoning").
		event(EventReasoningMessageStart)
}

// ReasoningMessageContent carries a piece of reasoning text.
func ReasoningMessageContent(messageID, delta string) Event {
	return newObject(EventReasoningMessageContent).str("messageId", messageID).str("delta", delta).
		event(EventReasoningMessageContent)
}

// ReasoningMessageEnd closes a reasoning message.
func ReasoningMessageEnd(messageID string) Event {
	return newObject(EventReasoningMessageEnd).str("messageId", messageID).event(EventReasoningMessageEnd)
}

// ReasoningEnd closes a reasoning span.
func ReasoningEnd(messageID string) Event {
	return newObject(EventReasoningEnd).str("messageId", messageID).event(EventReasoningEnd)
}

// ToolCallStart opens a tool call made in the assistant message parentMessageID.
func ToolCallStart(toolCallID, name, parentMessageID string) Event {
	return newObject(EventToolCallStart).str("toolCallId", toolCallID).str("toolCallName", name).
		optStr("parentMessageId", parentMessageID).event(EventToolCallStart)
}

// ToolCallArgs carries a piece of a tool call's JSON arguments.
func ToolCallArgs(toolCallID, delta string) Event {
	return newObject(EventToolCallArgs).str("toolCallId", toolCallID).str("delta", delta).
		event(EventToolCallArgs)
}

// ToolCallEnd closes a tool call's arguments.
func ToolCallEnd(toolCallID string) Event {
	return newObject(EventToolCallEnd).str("toolCallId", toolCallID).event(EventToolCallEnd)
}

// ToolCallResult carries a tool's result as the tool message messageID. A
// failed call says so in metadata.kerneld.isError.
func ToolCallResult(messageID, toolCallID, content string, isError bool) Event {
	ev := newObject(EventToolCallResult).str("messageId", messageID).str("toolCallId", toolCallID).
		str("content", content).str("role", string(RoleTool)).event(EventToolCallResult)
	if isError {
		ev.Meta = json.RawMessage(`{"isError":true}`)
	}
	return ev
}

// StepStarted opens a named step of a run.
func StepStarted(name string) Event {
	return newObject(EventStepStarted).str("stepName", name).event(EventStepStarted)
}

// StepFinished closes a named step of a run.
func StepFinished(name string) Event {
	return newObject(EventStepFinished).str("stepName", name).event(EventStepFinished)
}

// Custom is a kerneld event with no AG-UI equivalent; name starts with
// "kerneld.". value must marshal to JSON.
func Custom(name string, value any) Event {
	v, err := json.Marshal(value)
	if err != nil {
		v = []byte("null")
	}
	return newObject(EventCustom).str("name", name).raw("value", v).event(EventCustom)
}

// CustomRunResumed is the CUSTOM event that continues a run another
// process left unfinished (see ResumeCrash): it follows the events that
// close what that process opened, and the run goes on after it.
const CustomRunResumed = "kerneld.run.resumed"

// RunResumed is the kerneld.run.resumed event of run runID, continued from
// step, the number of its model calls already recorded, for reason (one
// of the Resume values). cutMessages and cutToolCalls name the messages
// (text and reasoning) and the tool calls of the model call that was cut
// short and is made again: a client shows what that call makes instead of
// them.
func RunResumed(runID string, step int, reason string, cutMessages, cutToolCalls []string) Event {
	value := struct {
		RunID        string   `json:"runId"`
		Step         int      `json:"step"`
		Reason       string   `json:"reason"`
		CutMessages  []string `json:"cutMessageIds"`
		CutToolCalls []string `json:"cutToolCallIds"`
	}{runID, step, reason, cutMessages, cutToolCalls}
	if value.CutMessages == nil {
		value.CutMessages = []string{}
	}
	if value.CutToolCalls == nil {
		value.CutToolCalls = []string{}
	}
	return Custom(CustomRunResumed, value)
}

// metaString returns {"key":"value"} for Event.Meta.
func metaString(key, value string) json.RawMessage {
	b := append([]byte(`{"`), key...)
	b = append(b, `":`...)
	return json.RawMessage(append(appendString(b, value), '}'))
}

// Fields decodes the event's AG-UI object, for readers that need a member
// (recovery, tests). It is not for hot paths.
func (e *Event) Fields() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Data, &m) // Data is always an object this package built
	return m
}

// Member returns the named string member of the event's AG-UI object, or "".
func (e *Event) Member(name string) string {
	s, _ := e.Fields()[name].(string)
	return s
}

// SubagentStarted opens a child run, in the parent run's stream:
// subagentRunID is the child's run, name its agent, parentToolCallID the
// tool call that spawned it; the child session rides in
// metadata.kerneld.childSessionId.
func SubagentStarted(subagentRunID, name, parentToolCallID, childSessionID string) Event {
	ev := newObject(EventSubagentStarted).str("subagentRunId", subagentRunID).str("name", name).
		optStr("parentToolCallId", parentToolCallID).event(EventSubagentStarted)
	ev.Meta = metaString("childSessionId", PublicID(childSessionID))
	return ev
}

// SubagentFinished closes a child run that succeeded; result is its answer.
func SubagentFinished(subagentRunID, result string) Event {
	o := newObject(EventSubagentFinished).str("subagentRunId", subagentRunID).str("result", result)
	o = append(o.key("outcome"), `{"type":"success"}`...)
	return o.event(EventSubagentFinished)
}

// SubagentError closes a child run that failed or was cancelled.
func SubagentError(subagentRunID, code, message string) Event {
	return newObject(EventSubagentError).str("subagentRunId", subagentRunID).str("message", message).
		optStr("code", code).event(EventSubagentError)
}
