package client

import (
	"encoding/json"
	"fmt"
)

// AG-UI event types kerneld sends (AG-UI 1.0; see api/openapi.yaml).
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunErrorType            = "RUN_ERROR"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	SubagentStarted         = "SUBAGENT_STARTED"
	SubagentFinished        = "SUBAGENT_FINISHED"
	SubagentError           = "SUBAGENT_ERROR"
	MessagesSnapshot        = "MESSAGES_SNAPSHOT"
	Custom                  = "CUSTOM"
)

// Names of kerneld's CUSTOM events.
const (
	CustomApprovalRequested = "kerneld.approval.requested"
	CustomApprovalResolved  = "kerneld.approval.resolved"
	CustomRunQueued         = "kerneld.run.queued"
	CustomRunSteered        = "kerneld.run.steered"
	// CustomRunResumed goes on with a run after the process running it
	// stopped; the stream needs nothing special to follow it: the run keeps
	// its id and its seq goes on. Its value names the reason and the
	// messages of the model call that was cut and is made again.
	CustomRunResumed = "kerneld.run.resumed"
)

// Event is one AG-UI event of a session's log. Type, Seq, RunID and Raw
// are always set; the typed fields below them are set for the event types
// that carry them and are zero otherwise. Raw holds every member,
// for the rest.
type Event struct {
	Type      string
	Seq       int64 // position in the session's log (the SSE id)
	SessionID string
	RunID     string
	Raw       json.RawMessage // the event as kerneld sent it

	// TEXT_MESSAGE_*, REASONING_*: the message; TOOL_CALL_RESULT: the
	// tool message.
	MessageID string
	// TEXT_MESSAGE_START: user or assistant. A Stream also sets it on the
	// TEXT_MESSAGE_CONTENT and TEXT_MESSAGE_END of a message whose START it
	// delivered (kerneld sends the role on the START only), so a reader
	// can tell the assistant's text from the echoed input by this field
	// alone; see Stream.AssistantText.
	Role string
	// TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT, TOOL_CALL_ARGS:
	// the next piece of text or of the JSON arguments.
	Delta string

	// TOOL_CALL_*: the call; TOOL_CALL_START also names the tool.
	ToolCallID      string
	ToolCallName    string
	ParentMessageID string
	// TOOL_CALL_RESULT: the result, and whether the call failed.
	Content string
	IsError bool

	// RUN_FINISHED: success or cancelled (Reason says why: cancelled or
	// interrupted).
	Outcome string
	Reason  string
	// RUN_ERROR: why the run failed (Code: interrupted, timeout,
	// max_turns, model_error, internal); SUBAGENT_ERROR likewise.
	Code    string
	Message string

	// CUSTOM: kerneld.* name and value; SUBAGENT_STARTED: Name is the
	// child's agent.
	Name  string
	Value json.RawMessage

	// SUBAGENT_*: the child's run; SUBAGENT_STARTED also its session.
	SubagentRunID  string
	ChildSessionID string

	// Snapshot marks the RUN_STARTED and RUN_FINISHED around the
	// MESSAGES_SNAPSHOT a ?snapshot=messages stream of an idle session
	// starts with (FollowOptions.Snapshot): they put the snapshot inside a
	// run, as AG-UI requires, but are not in the log and are no run of the
	// session. Their Seq is the snapshot's.
	Snapshot bool
}

// Ends reports whether the event closes its run.
func (e Event) Ends() bool { return e.Type == RunFinished || e.Type == RunErrorType }

// ApprovalRequest is the value of a CUSTOM kerneld.approval.requested.
type ApprovalRequest struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Arguments  json.RawMessage `json:"arguments"`
}

// ApprovalRequest returns what a CUSTOM kerneld.approval.requested asks;
// ok is false for any other event.
func (e Event) ApprovalRequest() (req ApprovalRequest, ok bool) {
	if e.Type != Custom || e.Name != CustomApprovalRequested {
		return req, false
	}
	return req, json.Unmarshal(e.Value, &req) == nil
}

// wireEvent is every member Event reads, as kerneld sends them.
type wireEvent struct {
	Type            string                `json:"type"`
	ThreadID        string                `json:"threadId"`
	RunID           string                `json:"runId"`
	MessageID       string                `json:"messageId"`
	Role            string                `json:"role"`
	Delta           string                `json:"delta"`
	ToolCallID      string                `json:"toolCallId"`
	ToolCallName    string                `json:"toolCallName"`
	ParentMessageID string                `json:"parentMessageId"`
	Content         string                `json:"content"`
	Outcome         struct{ Type string } `json:"outcome"`
	Code            string                `json:"code"`
	Message         string                `json:"message"`
	Name            string                `json:"name"`
	Value           json.RawMessage       `json:"value"`
	SubagentRunID   string                `json:"subagentRunId"`
	Metadata        struct {
		Kerneld struct {
			Seq            int64  `json:"seq"`
			SessionID      string `json:"sessionId"`
			RunID          string `json:"runId"`
			Reason         string `json:"reason"`
			IsError        bool   `json:"isError"`
			ChildSessionID string `json:"childSessionId"`
			Snapshot       bool   `json:"snapshot"`
		} `json:"kerneld"`
	} `json:"metadata"`
}

// ParseEvent decodes one event. seq is the event's SSE id; 0 takes it
// from metadata.kerneld.seq, where JSON event pages put it.
func ParseEvent(raw []byte, seq int64) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	if w.Type == "" {
		return Event{}, fmt.Errorf("decode event: no type in %.80s", raw)
	}
	k := w.Metadata.Kerneld
	if seq == 0 {
		seq = k.Seq
	}
	runID := k.RunID
	if runID == "" {
		runID = w.RunID
	}
	return Event{
		Type: w.Type, Seq: seq, SessionID: k.SessionID, RunID: runID, Raw: json.RawMessage(raw),
		MessageID: w.MessageID, Role: w.Role, Delta: w.Delta,
		ToolCallID: w.ToolCallID, ToolCallName: w.ToolCallName, ParentMessageID: w.ParentMessageID,
		Content: w.Content, IsError: k.IsError,
		Outcome: w.Outcome.Type, Reason: k.Reason, Code: w.Code, Message: w.Message,
		Name: w.Name, Value: w.Value,
		SubagentRunID: w.SubagentRunID, ChildSessionID: k.ChildSessionID,
		Snapshot: k.Snapshot,
	}, nil
}

// Messages returns the history a MESSAGES_SNAPSHOT holds, oldest first;
// ok is false for any other event. The snapshot carries no positions or
// times: Position and CreatedAt are zero.
func (e Event) Messages() (msgs []Message, ok bool) {
	if e.Type != MessagesSnapshot {
		return nil, false
	}
	var v struct {
		Messages []aguiMessage `json:"messages"`
	}
	if err := json.Unmarshal(e.Raw, &v); err != nil {
		return nil, false
	}
	msgs = make([]Message, len(v.Messages))
	for i, m := range v.Messages {
		msgs[i] = m.message()
	}
	return msgs, true
}

// aguiMessage is a message in AG-UI's shape, as a snapshot holds it.
type aguiMessage struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"toolCallId"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls"`
	Metadata struct {
		Kerneld struct {
			RunID   string `json:"runId"`
			IsError bool   `json:"isError"`
		} `json:"kerneld"`
	} `json:"metadata"`
}

func (m aguiMessage) message() Message {
	out := Message{ID: m.ID, RunID: m.Metadata.Kerneld.RunID, Role: m.Role, Content: m.Content,
		ToolCallID: m.ToolCallID, IsError: m.Metadata.Kerneld.IsError, ToolCalls: make([]ToolCall, len(m.ToolCalls))}
	for i, c := range m.ToolCalls {
		out.ToolCalls[i] = ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return out
}
