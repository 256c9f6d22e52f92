package kernel

import (
	"strings"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// turn maps one streamed model response to AG-UI events and accumulates
// the assistant message it forms. It remembers what it opened so that
// every exit path can close it.
type turn struct {
	// step is the model call's number within its run; the turn's first
	// event carries it (metadata.kerneld.step), so that whoever continues
	// a run cut in this call knows where the call began in the log.
	step        int
	marked      bool
	assistantID string // the assistant message: its first text and the tool calls' parent
	textID      string // messageId of the open text message, "" when none is open
	textStreams int    // text messages opened so far
	text        strings.Builder

	reasoningID   string
	reasoningOpen bool

	calls   []*streamedCall // in order of first appearance
	byIndex map[int]*streamedCall
	current *streamedCall // the call whose arguments are streaming
	usage   llm.Usage
}

// streamedCall is a tool call as it streams in.
type streamedCall struct {
	id, name string
	args     strings.Builder
	started  bool   // TOOL_CALL_START emitted
	ended    bool   // TOOL_CALL_END emitted
	early    string // arguments that arrived before the call's name
}

func newTurn(step int) *turn {
	return &turn{step: step, assistantID: session.NewMessageID(), byIndex: make(map[int]*streamedCall)}
}

// apply returns the events for one chunk.
func (t *turn) apply(c llm.Chunk) []session.Event {
	var evs []session.Event
	switch {
	case c.Reasoning != "":
		evs = t.reasoningDelta(c.Reasoning)
	case c.Text != "":
		evs = t.textDelta(c.Text)
	case c.ToolCall != nil:
		evs = t.toolCallDelta(c.ToolCall)
	case c.Usage != nil:
		t.usage = *c.Usage
	}
	if len(evs) > 0 && !t.marked {
		evs[0], t.marked = evs[0].WithMeta("step", t.step), true
	}
	return evs
}

func (t *turn) reasoningDelta(delta string) []session.Event {
	var evs []session.Event
	if !t.reasoningOpen {
		t.reasoningID, t.reasoningOpen = session.NewMessageID(), true
		evs = append(evs, session.ReasoningStart(t.reasoningID), session.ReasoningMessageStart(t.reasoningID))
	}
	return append(evs, session.ReasoningMessageContent(t.reasoningID, delta))
}

// textDelta streams assistant text. The first text message carries the
// assistant message's id; text resumed after a tool call (rare) opens a
// new one, since the first was closed when the call started.
func (t *turn) textDelta(delta string) []session.Event {
	evs := t.closeReasoning()
	evs = append(evs, t.endCurrent()...)
	if t.textID == "" {
		t.textID = t.assistantID
		if t.textStreams > 0 {
			t.textID = session.NewMessageID()
		}
		t.textStreams++
		evs = append(evs, session.TextMessageStart(t.textID, session.RoleAssistant))
	}
	t.text.WriteString(delta)
	return append(evs, session.TextMessageContent(t.textID, delta))
}

// closeText ends the open text message, if any.
func (t *turn) closeText() []session.Event {
	if t.textID == "" {
		return nil
	}
	id := t.textID
	t.textID = ""
	return []session.Event{session.TextMessageEnd(id)}
}

// toolCallDelta starts a call once its name is known (ending the text and
// the previous call: providers stream them one after another) and streams
// its arguments.
func (t *turn) toolCallDelta(d *llm.ToolCallDelta) []session.Event {
	evs := t.closeReasoning()
	c := t.byIndex[d.Index]
	if c == nil {
		c = &streamedCall{}
		t.byIndex[d.Index] = c
		t.calls = append(t.calls, c)
	}
	if c.id == "" && d.ID != "" {
		c.id = d.ID
	}
	if c.name == "" && d.Name != "" {
		c.name = d.Name
	}
	c.args.WriteString(d.Arguments)
	if !c.started {
		if c.name == "" {
			c.early += d.Arguments
			return evs
		}
		evs = append(evs, t.closeText()...)
		evs = append(evs, t.endCurrent()...)
		evs = append(evs, t.startCall(c)...)
		return evs
	}
	if d.Arguments != "" && !c.ended {
		evs = append(evs, session.ToolCallArgs(c.id, d.Arguments))
	}
	return evs
}

func (t *turn) startCall(c *streamedCall) []session.Event {
	if c.id == "" {
		c.id = "call_" + session.NewMessageID()
	}
	c.started, t.current = true, c
	evs := []session.Event{session.ToolCallStart(c.id, c.name, t.assistantID)}
	if c.early != "" {
		evs = append(evs, session.ToolCallArgs(c.id, c.early))
		c.early = ""
	}
	return evs
}

func (t *turn) endCurrent() []session.Event {
	c := t.current
	t.current = nil
	if c == nil || c.ended {
		return nil
	}
	c.ended = true
	return []session.Event{session.ToolCallEnd(c.id)}
}

func (t *turn) closeReasoning() []session.Event {
	if !t.reasoningOpen {
		return nil
	}
	t.reasoningOpen = false
	return []session.Event{session.ReasoningMessageEnd(t.reasoningID), session.ReasoningEnd(t.reasoningID)}
}

// close returns the events that end whatever the turn left open.
func (t *turn) close() []session.Event {
	evs := t.closeReasoning()
	evs = append(evs, t.closeText()...)
	for _, c := range t.calls {
		if c.started && !c.ended {
			c.ended = true
			evs = append(evs, session.ToolCallEnd(c.id))
		}
	}
	t.current = nil
	return evs
}

// message returns the assistant message the turn formed, and false when
// the model produced neither text nor a tool call.
func (t *turn) message() (session.Message, bool) {
	m := session.Message{ID: t.assistantID, Role: session.RoleAssistant, Content: t.text.String()}
	for _, c := range t.calls {
		if c.started {
			m.ToolCalls = append(m.ToolCalls, session.ToolCall{ID: c.id, Name: c.name, Arguments: argsOrEmpty(c.args.String())})
		}
	}
	return m, m.Content != "" || len(m.ToolCalls) > 0
}

// argsOrEmpty returns args, or "{}" when the model sent no arguments.
func argsOrEmpty(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	return args
}
