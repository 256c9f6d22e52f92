package kernel

import (
	"encoding/json"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// replayedRun is what a run's events say it did: the messages it streamed,
// the tool calls it made and what it left open. Recovery rebuilds it from
// the log because the log, not the history, is the source of truth.
type replayedRun struct {
	texts     []*replayedText // in order of TEXT_MESSAGE_START
	textByID  map[string]*replayedText
	reasoning []string // reasoning messages still open
	spans     []string // reasoning spans still open
	calls     []*replayedCall
	callByID  map[string]*replayedCall
	terminal  *session.Event // RUN_FINISHED or RUN_ERROR, if logged
	endSeq    int64
}

type replayedText struct {
	id      string
	role    session.Role
	content strings.Builder
	open    bool
}

type replayedCall struct {
	id, name, parent string
	args             strings.Builder
	ended            bool
	result           *session.Message // from TOOL_CALL_RESULT, if logged
}

// replayRun folds a run's events into what they describe.
func replayRun(evs []session.Event) *replayedRun {
	rp := &replayedRun{textByID: map[string]*replayedText{}, callByID: map[string]*replayedCall{}}
	for i := range evs {
		rp.apply(&evs[i])
	}
	return rp
}

func (rp *replayedRun) apply(ev *session.Event) {
	f := ev.Fields()
	str := func(k string) string { s, _ := f[k].(string); return s }
	switch ev.Type {
	case session.EventTextMessageStart:
		t := &replayedText{id: str("messageId"), role: session.Role(str("role")), open: true}
		rp.texts, rp.textByID[t.id] = append(rp.texts, t), t
	case session.EventTextMessageContent:
		if t := rp.textByID[str("messageId")]; t != nil {
			t.content.WriteString(str("delta"))
		}
	case session.EventTextMessageEnd:
		if t := rp.textByID[str("messageId")]; t != nil {
			t.open = false
		}
	case session.EventReasoningStart:
		rp.spans = append(rp.spans, str("messageId"))
	case session.EventReasoningMessageStart:
		rp.reasoning = append(rp.reasoning, str("messageId"))
	case session.EventReasoningMessageEnd:
		rp.reasoning = remove(rp.reasoning, str("messageId"))
	case session.EventReasoningEnd:
		rp.spans = remove(rp.spans, str("messageId"))
	default:
		rp.applyTool(ev, str)
	}
	if ev.Type.Ends() {
		rp.terminal = ev
	}
	rp.endSeq = ev.Seq
}

func (rp *replayedRun) applyTool(ev *session.Event, str func(string) string) {
	switch ev.Type {
	case session.EventToolCallStart:
		c := &replayedCall{id: str("toolCallId"), name: str("toolCallName"), parent: str("parentMessageId")}
		rp.calls, rp.callByID[c.id] = append(rp.calls, c), c
	case session.EventToolCallArgs:
		if c := rp.callByID[str("toolCallId")]; c != nil {
			c.args.WriteString(str("delta"))
		}
	case session.EventToolCallEnd:
		if c := rp.callByID[str("toolCallId")]; c != nil {
			c.ended = true
		}
	case session.EventToolCallResult:
		if c := rp.callByID[str("toolCallId")]; c != nil {
			c.result = &session.Message{ID: str("messageId"), Role: session.RoleTool, Content: str("content"),
				ToolCallID: c.id, IsError: metaFlag(ev, "isError")}
		}
	}
}

// closers returns the events that close what the run left open, then an
// error result for every tool call without one, with the tool messages
// those results form.
func (rp *replayedRun) closers() ([]session.Event, []session.Message) {
	var evs []session.Event
	for _, id := range rp.reasoning {
		evs = append(evs, session.ReasoningMessageEnd(id))
	}
	for _, id := range rp.spans {
		evs = append(evs, session.ReasoningEnd(id))
	}
	for _, t := range rp.texts {
		if t.open {
			evs = append(evs, session.TextMessageEnd(t.id))
		}
	}
	var msgs []session.Message
	for _, c := range rp.calls {
		if !c.ended {
			evs = append(evs, session.ToolCallEnd(c.id))
		}
		if c.result == nil {
			m := session.Message{ID: session.NewMessageID(), Role: session.RoleTool, Content: interruptedToolResult, ToolCallID: c.id, IsError: true}
			evs = append(evs, session.ToolCallResult(m.ID, c.id, m.Content, true))
			msgs = append(msgs, m)
		}
	}
	return evs, msgs
}

// interruptedToolResult answers a tool call the process died under.
const interruptedToolResult = "error: kerneld stopped before this tool call returned"

// messages returns the history the run's events describe, in order: text
// messages (the assistant's carrying the tool calls made under them), then
// the logged tool results.
func (rp *replayedRun) messages() []session.Message {
	var out []session.Message
	assistant := map[string]int{} // message id → index in out
	for _, t := range rp.texts {
		out = append(out, session.Message{ID: t.id, Role: t.role, Content: t.content.String()})
		if t.role == session.RoleAssistant {
			assistant[t.id] = len(out) - 1
		}
	}
	for _, c := range rp.calls {
		i, ok := assistant[c.parent]
		if !ok { // tool calls without text: their assistant message has no text event
			out = append(out, session.Message{ID: c.parent, Role: session.RoleAssistant})
			i = len(out) - 1
			assistant[c.parent] = i
		}
		out[i].ToolCalls = append(out[i].ToolCalls, session.ToolCall{ID: c.id, Name: c.name, Arguments: argsOrEmpty(c.args.String())})
	}
	for _, c := range rp.calls {
		if c.result != nil {
			out = append(out, *c.result)
		}
	}
	return out
}

// metaFlag reads a boolean member of an event's metadata.kerneld.
func metaFlag(ev *session.Event, name string) bool {
	var m map[string]any
	if json.Unmarshal(ev.Meta, &m) != nil {
		return false
	}
	b, _ := m[name].(bool)
	return b
}

// metaReason reads metadata.kerneld.reason of an event.
func metaReason(ev *session.Event) string {
	var m map[string]any
	if json.Unmarshal(ev.Meta, &m) != nil {
		return ""
	}
	s, _ := m["reason"].(string)
	return s
}

func remove(ids []string, id string) []string {
	for i, v := range ids {
		if v == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}
