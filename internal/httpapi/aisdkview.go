package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"strings"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// uiView presents a run on the AI SDK route as a UI message stream (the
// `ai` package's UIMessageChunk objects, one per SSE data line, ending in
// `data: [DONE]`). The run is one assistant UIMessage whose id is
// answerID; each model call is a step. It reads the AG-UI frames the hub
// shares and keeps what a chunk needs from earlier events: a tool call's
// name and arguments, the echoed user input it must not send back.
//
// Like the AG-UI view, it ends the stream when the run waits for
// approval: the AI SDK client answers in its next request, which streams
// the rest of the same message. A stream serves one goroutine; the view
// is not shared.
type uiView struct {
	answerID  string
	sessionID string // public
	runID     string
	// pending returns the approvals the run waits for now.
	pending func(ctx context.Context) []kernel.Approval

	started   bool
	stepOpen  bool // a step's chunks were sent
	stepTools bool // and a tool result of it: the next model output is a new step
	user      map[string]bool
	tools     map[string]*uiToolCall
	asked     map[string]bool // approvals requested in this stream
	denied    map[string]bool
}

// uiToolCall is what the view remembers of a tool call.
type uiToolCall struct {
	name string
	args strings.Builder
}

// uiDone ends a UI message stream.
const uiDone = "data: [DONE]\n\n"

// newUIView returns the view of run, whose answer is the UIMessage
// answerID, for a client of session sessionID.
func (s *Server) newUIView(run session.Run, answerID string) *uiView {
	return &uiView{
		answerID: answerID, sessionID: session.PublicID(run.SessionID), runID: run.ID,
		pending: func(ctx context.Context) []kernel.Approval {
			p, err := s.pendingApprovals(ctx, run)
			if err != nil {
				return nil // unreadable: the stream goes on, and ends with the run
			}
			return p
		},
		user: map[string]bool{}, tools: map[string]*uiToolCall{}, asked: map[string]bool{}, denied: map[string]bool{},
	}
}

// aguiEvent holds the members of an AG-UI event that the view reads.
type aguiEvent struct {
	MessageID        string                `json:"messageId"`
	Role             string                `json:"role"`
	Delta            string                `json:"delta"`
	ToolCallID       string                `json:"toolCallId"`
	ToolCallName     string                `json:"toolCallName"`
	Content          json.RawMessage       `json:"content"`
	Name             string                `json:"name"`
	Value            json.RawMessage       `json:"value"`
	Outcome          struct{ Type string } `json:"outcome"`
	Usage            []aguiUsage           `json:"usage"`
	Message          string                `json:"message"`
	Code             string                `json:"code"`
	SubagentRunID    string                `json:"subagentRunId"`
	ParentToolCallID string                `json:"parentToolCallId"`
	Result           string                `json:"result"`
	Snapshot         json.RawMessage       `json:"snapshot"`
	Metadata         struct {
		Kerneld struct {
			IsError        bool   `json:"isError"`
			ChildSessionID string `json:"childSessionId"`
			Reason         string `json:"reason"`
		} `json:"kerneld"`
	} `json:"metadata"`
}

// aguiUsage is one entry of a run end's usage.
type aguiUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
}

// frameData returns the JSON of an SSE frame's data line.
func frameData(frame []byte) []byte {
	i := bytes.Index(frame, []byte("data: "))
	if i < 0 {
		return nil
	}
	data := frame[i+len("data: "):]
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return data
}

// render appends the chunks of the event in frame to dst, and reports
// whether the stream ends with it: the run ended, or it waits for an
// approval.
func (v *uiView) render(ctx context.Context, dst []byte, typ session.EventType, frame []byte) ([]byte, bool) {
	data := bytes.Clone(frameData(frame)) // frame may lie in dst, which the chunks overwrite
	var ev aguiEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return dst, false // every frame the hub holds is an event of the log
	}
	if !v.started {
		v.started = true
		dst = v.append(dst, map[string]any{"type": "start", "messageId": v.answerID,
			"messageMetadata": map[string]any{"sessionId": v.sessionID, "runId": v.runID}})
	}
	switch typ {
	case session.EventRunStarted, session.EventReasoningStart, session.EventReasoningEnd,
		session.EventStepStarted, session.EventStepFinished:
		return dst, false // the start is sent; steps are the view's own
	case session.EventTextMessageStart, session.EventTextMessageContent, session.EventTextMessageEnd:
		return v.text(dst, typ, &ev), false
	case session.EventReasoningMessageStart, session.EventReasoningMessageContent, session.EventReasoningMessageEnd:
		return v.reasoning(dst, typ, &ev), false
	case session.EventToolCallStart, session.EventToolCallArgs, session.EventToolCallEnd:
		return v.toolCall(dst, typ, &ev), false
	case session.EventToolCallResult:
		return v.toolResult(dst, &ev), false
	case session.EventSubagentStarted, session.EventSubagentFinished, session.EventSubagentError:
		return v.subagent(dst, typ, &ev), false
	case session.EventCustom:
		return v.custom(ctx, dst, &ev)
	case session.EventRunFinished, session.EventRunError:
		return v.end(dst, typ, &ev), true
	}
	return v.append(dst, map[string]any{"type": "data-kerneld-event", "transient": true,
		"data": json.RawMessage(data)}), false
}

// step opens a step for model output, closing the one before it when
// that one's tool calls have their results.
func (v *uiView) step(dst []byte) []byte {
	if v.stepOpen && !v.stepTools {
		return dst
	}
	if v.stepOpen {
		dst = v.append(dst, map[string]any{"type": "finish-step"})
	}
	v.stepOpen, v.stepTools = true, false
	return v.append(dst, map[string]any{"type": "start-step"})
}

// text maps assistant text. The user's input, echoed into the log, is
// the client's own message: it is never sent back as the answer's text.
func (v *uiView) text(dst []byte, typ session.EventType, ev *aguiEvent) []byte {
	switch {
	case typ == session.EventTextMessageStart && ev.Role != string(session.RoleAssistant):
		v.user[ev.MessageID] = true
		return dst
	case v.user[ev.MessageID]:
		return dst
	case typ == session.EventTextMessageStart:
		dst = v.step(dst)
		return v.append(dst, map[string]any{"type": "text-start", "id": ev.MessageID})
	case typ == session.EventTextMessageContent:
		return v.append(dst, map[string]any{"type": "text-delta", "id": ev.MessageID, "delta": ev.Delta})
	}
	return v.append(dst, map[string]any{"type": "text-end", "id": ev.MessageID})
}

// reasoning maps the model's reasoning.
func (v *uiView) reasoning(dst []byte, typ session.EventType, ev *aguiEvent) []byte {
	switch typ {
	case session.EventReasoningMessageStart:
		dst = v.step(dst)
		return v.append(dst, map[string]any{"type": "reasoning-start", "id": ev.MessageID})
	case session.EventReasoningMessageContent:
		return v.append(dst, map[string]any{"type": "reasoning-delta", "id": ev.MessageID, "delta": ev.Delta})
	}
	return v.append(dst, map[string]any{"type": "reasoning-end", "id": ev.MessageID})
}

// toolCall maps a tool call as it streams: its input arrives in pieces,
// and is available, parsed, once the call ends.
func (v *uiView) toolCall(dst []byte, typ session.EventType, ev *aguiEvent) []byte {
	c := v.tools[ev.ToolCallID]
	switch {
	case typ == session.EventToolCallStart:
		dst = v.step(dst)
		v.tools[ev.ToolCallID] = &uiToolCall{name: ev.ToolCallName}
		return v.append(dst, map[string]any{"type": "tool-input-start", "toolCallId": ev.ToolCallID, "toolName": ev.ToolCallName})
	case c == nil:
		return dst // a call this stream did not see start cannot be shown
	case typ == session.EventToolCallArgs:
		c.args.WriteString(ev.Delta)
		return v.append(dst, map[string]any{"type": "tool-input-delta", "toolCallId": ev.ToolCallID, "inputTextDelta": ev.Delta})
	}
	return v.append(dst, map[string]any{"type": "tool-input-available", "toolCallId": ev.ToolCallID,
		"toolName": c.name, "input": toolInput(c.args.String())})
}

// toolResult maps a tool's result: its output, its error, or the denial
// of its approval.
func (v *uiView) toolResult(dst []byte, ev *aguiEvent) []byte {
	v.stepTools = true
	content := resultText(ev.Content)
	switch {
	case v.denied[ev.ToolCallID]:
		return v.append(dst, map[string]any{"type": "tool-output-denied", "toolCallId": ev.ToolCallID})
	case ev.Metadata.Kerneld.IsError:
		return v.append(dst, map[string]any{"type": "tool-output-error", "toolCallId": ev.ToolCallID, "errorText": content})
	}
	return v.append(dst, map[string]any{"type": "tool-output-available", "toolCallId": ev.ToolCallID, "output": toolOutput(content)})
}

// subagent maps a child session's progress to one data part, updated in
// place (same type and id) as the child goes on.
func (v *uiView) subagent(dst []byte, typ session.EventType, ev *aguiEvent) []byte {
	data := map[string]any{"runId": ev.SubagentRunID}
	switch typ {
	case session.EventSubagentStarted:
		data["status"], data["agent"], data["sessionId"] = "running", ev.Name, ev.Metadata.Kerneld.ChildSessionID
		if ev.ParentToolCallID != "" {
			data["toolCallId"] = ev.ParentToolCallID
		}
	case session.EventSubagentFinished:
		data["status"], data["result"] = "finished", ev.Result
	default:
		data["status"], data["error"] = "error", map[string]any{"code": ev.Code, "message": ev.Message}
	}
	return v.append(dst, map[string]any{"type": "data-kerneld-subagent", "id": ev.SubagentRunID, "data": data})
}

// custom maps kerneld's own events. Approvals become the tool parts'
// approval states; the rest are transient data parts named after the
// event (kerneld.run.queued → data-kerneld-run-queued), which useChat
// hands to onData without adding them to the message.
func (v *uiView) custom(ctx context.Context, dst []byte, ev *aguiEvent) ([]byte, bool) {
	switch ev.Name {
	case approvalRequestedEvent:
		return v.approvalRequested(ctx, dst)
	case approvalResolvedEvent:
		var d struct{ ToolCallID, Decision, Reason string }
		_ = json.Unmarshal(ev.Value, &d) // the kernel writes it; a bad one leaves the part as it was
		approved := d.Decision == kernel.DecisionApprove
		if !approved {
			v.denied[d.ToolCallID] = true
		}
		chunk := map[string]any{"type": "tool-approval-response", "approvalId": d.ToolCallID, "approved": approved}
		if d.Reason != "" {
			chunk["reason"] = d.Reason
		}
		return v.append(dst, chunk), false
	}
	name := strings.ReplaceAll(strings.TrimPrefix(ev.Name, "kerneld."), ".", "-")
	return v.append(dst, map[string]any{"type": "data-kerneld-" + name, "transient": true, "data": ev.Value}), false
}

// The CUSTOM events of approvals (the kernel's names).
const (
	approvalRequestedEvent = "kerneld.approval.requested"
	approvalResolvedEvent  = "kerneld.approval.resolved"
)

// approvalRequested asks for every approval the run waits for, once, and
// ends the stream: the client's answer comes in its next request. When
// nothing is pending any more (decided meanwhile, or a replay of a run
// that went on), the stream goes on.
func (v *uiView) approvalRequested(ctx context.Context, dst []byte) ([]byte, bool) {
	pending := v.pending(ctx)
	if len(pending) == 0 {
		return dst, false
	}
	for _, a := range pending {
		if v.asked[a.ToolCallID] {
			continue
		}
		v.asked[a.ToolCallID] = true
		dst = v.append(dst, map[string]any{"type": "tool-approval-request", "approvalId": a.ToolCallID, "toolCallId": a.ToolCallID})
	}
	if v.stepOpen {
		dst = v.append(dst, map[string]any{"type": "finish-step"})
	}
	dst = v.append(dst, map[string]any{"type": "finish", "finishReason": "tool-calls"})
	return append(dst, uiDone...), true
}

// end maps the run's end: the finish reason and usage on `finish`, a
// failure as an `error` chunk, a cancellation as `abort`.
func (v *uiView) end(dst []byte, typ session.EventType, ev *aguiEvent) []byte {
	if v.stepOpen {
		dst = v.append(dst, map[string]any{"type": "finish-step"})
	}
	reason := "stop"
	switch {
	case typ == session.EventRunError:
		reason = "error"
		dst = v.append(dst, map[string]any{"type": "error", "errorText": ev.Message})
	case ev.Outcome.Type == string(session.OutcomeCancelled):
		reason = "other"
		dst = v.append(dst, map[string]any{"type": "abort", "reason": cmp.Or(ev.Metadata.Kerneld.Reason, "cancelled")})
	}
	meta := map[string]any{"sessionId": v.sessionID, "runId": v.runID}
	if len(ev.Usage) > 0 {
		meta["usage"] = ev.Usage[0]
	}
	dst = v.append(dst, map[string]any{"type": "finish", "finishReason": reason, "messageMetadata": meta})
	return append(dst, uiDone...)
}

// append appends one chunk as an SSE data line.
func (v *uiView) append(dst []byte, chunk map[string]any) []byte {
	b, err := json.Marshal(chunk)
	if err != nil {
		return dst // strings, numbers and raw JSON from the log always encode
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// toolInput is a call's arguments as the client sees them: the JSON value,
// an empty object for none, the text itself when it is not JSON.
func toolInput(args string) any {
	if strings.TrimSpace(args) == "" {
		return map[string]any{}
	}
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return args
	}
	return v
}

// toolOutput is a tool's result as the client sees it: a JSON object or
// array as such, anything else as the text the model saw.
func toolOutput(content string) any {
	t := strings.TrimSpace(content)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return content
	}
	var v any
	if err := json.Unmarshal([]byte(t), &v); err != nil {
		return content
	}
	return v
}

// resultText is a TOOL_CALL_RESULT's content as text: kerneld writes a
// string; content parts are joined.
func resultText(content json.RawMessage) string {
	text, _ := messageText(content)
	return text
}
