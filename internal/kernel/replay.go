package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// replayedRun is what a run's events say it did: the messages it streamed,
// the tool calls it made, what it left open, and where each of its model
// calls began. Whoever takes up a run its process left rebuilds it from
// the log, because the log, not the history, is the source of truth.
type replayedRun struct {
	events    int
	startSeq  int64           // the seq of its RUN_STARTED, 0 if none was logged
	texts     []*replayedText // in order of TEXT_MESSAGE_START
	textByID  map[string]*replayedText
	reasoning []*replayedSpan // reasoning messages, in order of start
	spans     []*replayedSpan // reasoning spans, in order of start
	calls     []*replayedCall
	callByID  map[string]*replayedCall
	// steps holds the seq of the first event of each model call, by the
	// call's number (the last such event: a continued run makes its cut
	// call again under the same number).
	steps map[int]int64
	// children are the child runs spawn_agent calls started, by call.
	children map[string]*replayedChild
	// steered are the queued runs whose input the log shows joining this
	// run (kerneld.run.steered), by id.
	steered  map[string]bool
	terminal *session.Event // RUN_FINISHED or RUN_ERROR, if logged
	endSeq   int64
}

type replayedText struct {
	id      string
	seq     int64
	role    session.Role
	content strings.Builder
	open    bool
}

type replayedSpan struct {
	id   string
	seq  int64
	open bool
}

// replayedChild is a child run a spawn_agent call started, and how it
// ended, if the parent's log says.
type replayedChild struct {
	runID, sessionID, name string
	ended                  bool
	answer, failure        string // its answer, or why it failed
}

type replayedCall struct {
	id, name, parent string
	seq              int64
	args             strings.Builder
	ended            bool
	result           *session.Message // from TOOL_CALL_RESULT, if logged
}

// replayRun folds a run's events into what they describe.
func replayRun(evs []session.Event) *replayedRun {
	rp := &replayedRun{events: len(evs), textByID: map[string]*replayedText{}, callByID: map[string]*replayedCall{},
		steps: map[int]int64{}, children: map[string]*replayedChild{}, steered: map[string]bool{}}
	for i := range evs {
		rp.apply(&evs[i])
	}
	return rp
}

func (rp *replayedRun) apply(ev *session.Event) {
	f := ev.Fields()
	str := func(k string) string { s, _ := f[k].(string); return s }
	if n, ok := metaStep(ev); ok {
		rp.steps[n] = ev.Seq
	}
	switch ev.Type {
	case session.EventTextMessageStart:
		t := &replayedText{id: str("messageId"), seq: ev.Seq, role: session.Role(str("role")), open: true}
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
		rp.spans = append(rp.spans, &replayedSpan{id: str("messageId"), seq: ev.Seq, open: true})
	case session.EventReasoningMessageStart:
		rp.reasoning = append(rp.reasoning, &replayedSpan{id: str("messageId"), seq: ev.Seq, open: true})
	case session.EventReasoningMessageEnd:
		closeSpan(rp.reasoning, str("messageId"))
	case session.EventReasoningEnd:
		closeSpan(rp.spans, str("messageId"))
	case session.EventSubagentStarted, session.EventSubagentFinished, session.EventSubagentError:
		rp.applyChild(ev, str)
	case session.EventCustom:
		if str("name") == customRunSteered {
			v, _ := f["value"].(map[string]any)
			id, _ := v["steerRunId"].(string)
			rp.steered[id] = true
		}
	default:
		rp.applyTool(ev, str)
	}
	if ev.Type.Ends() {
		rp.terminal = ev
	}
	if ev.Type == session.EventRunStarted && rp.startSeq == 0 {
		rp.startSeq = ev.Seq
	}
	rp.endSeq = ev.Seq
}

func (rp *replayedRun) applyTool(ev *session.Event, str func(string) string) {
	switch ev.Type {
	case session.EventToolCallStart:
		c := &replayedCall{id: str("toolCallId"), name: str("toolCallName"), parent: str("parentMessageId"), seq: ev.Seq}
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

// applyChild folds the SUBAGENT_* events of the children spawn_agent
// calls started.
func (rp *replayedRun) applyChild(ev *session.Event, str func(string) string) {
	if ev.Type == session.EventSubagentStarted {
		sessionID, _ := metaMember(ev, "childSessionId").(string)
		rp.children[str("parentToolCallId")] = &replayedChild{runID: str("subagentRunId"), sessionID: sessionID, name: str("name")}
		return
	}
	for _, c := range rp.children {
		if c.runID == str("subagentRunId") {
			c.ended, c.answer, c.failure = true, str("result"), str("message")
		}
	}
}

// closeSpan marks the open span id of spans closed.
func closeSpan(spans []*replayedSpan, id string) {
	for _, s := range spans {
		if s.id == id && s.open {
			s.open = false
			return
		}
	}
}

// closeStreams returns the *_END events of the reasoning and text streams
// the run left open.
func (rp *replayedRun) closeStreams() []session.Event {
	var evs []session.Event
	for _, s := range rp.reasoning {
		if s.open {
			evs = append(evs, session.ReasoningMessageEnd(s.id))
		}
	}
	for _, s := range rp.spans {
		if s.open {
			evs = append(evs, session.ReasoningEnd(s.id))
		}
	}
	for _, t := range rp.texts {
		if t.open {
			evs = append(evs, session.TextMessageEnd(t.id))
		}
	}
	return evs
}

// closers returns the events that close what the run left open, then an
// error result for every tool call without one, with the tool messages
// those results form: how a run that is not continued is closed.
func (rp *replayedRun) closers() ([]session.Event, []session.Message) {
	evs := rp.closeStreams()
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

// notMadeToolResult answers, in the log, a tool call of a model call that
// was cut short: the call was never made, and the model call is made
// again.
const notMadeToolResult = "error: not called: the model call that asked for it was cut short and is made again"

// leftRun is what continuing a run adds to its log and its history.
type leftRun struct {
	step    int               // the model calls the history records for the run
	closing []session.Event   // they close what the previous process opened
	cut     []string          // the messages of the model call it cut short
	cutCall []string          // the tool calls of that model call
	record  []session.Message // what the log holds of completed steps but the history lacks
}

// leftOpen compares the run's log with the history and says what
// continuing it takes. The model call numbered after the calls the
// history records was cut short, if it logged anything: its streams are
// closed, its tool calls answered in the log as never made, and its
// messages listed as cut; it is never recorded. Streams and calls of
// completed steps stay as they are; their logged results, and logged user
// messages, missing from the history are recorded.
func (rp *replayedRun) leftOpen(runID string, history []session.Message) leftRun {
	step, _, answered := recordedSteps(history, runID)
	have := make(map[string]bool, len(history))
	for _, m := range history {
		have[m.ID] = true
	}
	left := leftRun{step: step, closing: rp.closeStreams()}
	// The cut call's first event says where it began; without one (it
	// logged nothing, or a version that did not mark calls logged it),
	// what the history does not record is what was cut.
	cutFrom, marked := rp.steps[step]
	isCut := func(seq int64, recorded bool) bool {
		if marked {
			return seq >= cutFrom
		}
		return !recorded
	}
	for _, t := range rp.texts {
		if t.role == session.RoleAssistant && isCut(t.seq, have[t.id]) {
			left.cut = append(left.cut, t.id)
		}
	}
	for _, s := range rp.reasoning {
		if isCut(s.seq, true) { // unmarked, reasoning cannot be told apart: kept
			left.cut = append(left.cut, s.id)
		}
	}
	cutCalls := map[string]bool{}
	for _, c := range rp.calls {
		if !c.ended {
			left.closing = append(left.closing, session.ToolCallEnd(c.id))
		}
		if isCut(c.seq, have[c.parent]) || !have[c.parent] {
			cutCalls[c.id] = true
			left.cutCall = append(left.cutCall, c.id)
			if c.result == nil {
				left.closing = append(left.closing, session.ToolCallResult(session.NewMessageID(), c.id, notMadeToolResult, true))
			}
		}
	}
	left.record = rp.unrecorded(have, answered, cutCalls)
	return left
}

// unrecorded returns the user messages, and the results of the tool calls
// of completed steps, that the log holds and the history lacks.
func (rp *replayedRun) unrecorded(have, answered, cutCalls map[string]bool) []session.Message {
	var out []session.Message
	for _, t := range rp.texts {
		if t.role == session.RoleUser && !t.open && !have[t.id] {
			out = append(out, session.Message{ID: t.id, Role: session.RoleUser, Content: t.content.String()})
		}
	}
	for _, c := range rp.calls {
		if c.result != nil && !answered[c.id] && !cutCalls[c.id] {
			out = append(out, *c.result)
		}
	}
	return out
}

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

// runEvents returns the run's events, from its RUN_STARTED to the end of
// the session's log (nothing is logged between runs, so they are all the
// run's). A run whose RUN_STARTED never reached the log has none.
func (k *Kernel) runEvents(ctx context.Context, r session.Run) ([]session.Event, error) {
	start := r.StartSeq
	if start == 0 {
		var err error
		if start, err = k.findRunStart(ctx, r); err != nil || start == 0 {
			return nil, err
		}
	}
	return k.readLog(ctx, r.SessionID, start-1)
}

// findRunStart looks for the run's RUN_STARTED near the end of the log,
// for a crash between appending it and recording its seq on the run.
func (k *Kernel) findRunStart(ctx context.Context, r session.Run) (int64, error) {
	s, err := k.store.GetSession(ctx, r.SessionID)
	if err != nil {
		return 0, fmt.Errorf("get session: %w", err)
	}
	evs, err := k.store.ReadEvents(ctx, r.SessionID, max(s.LastSeq-MaxEventPage, 0), MaxEventPage)
	if err != nil {
		return 0, fmt.Errorf("read events: %w", err)
	}
	for _, ev := range evs {
		if ev.Type == session.EventRunStarted && ev.RunID == r.ID {
			return ev.Seq, nil
		}
	}
	return 0, nil
}

// missingMessages returns those of msgs, the messages a run's events
// show, that the history lacks: the user's input, an assistant message the
// crash cut off, tool results that were logged but not recorded.
func (k *Kernel) missingMessages(ctx context.Context, r session.Run, msgs []session.Message) ([]session.Message, error) {
	history, err := k.store.ListMessages(ctx, r.SessionID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	have := make(map[string]bool, len(history))
	for _, m := range history {
		have[m.ID] = true
		if m.Role == session.RoleTool {
			have["call:"+m.ToolCallID] = true
		}
	}
	var out []session.Message
	for _, m := range msgs {
		key := m.ID
		if m.Role == session.RoleTool {
			key = "call:" + m.ToolCallID
		}
		if !have[key] {
			out = append(out, m)
		}
	}
	return out, nil
}

// appendRecovered records messages the log holds as the run's.
func (k *Kernel) appendRecovered(ctx context.Context, token int64, r session.Run, msgs []session.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := k.now().UTC()
	for i := range msgs {
		msgs[i].SessionID, msgs[i].RunID, msgs[i].CreatedAt = r.SessionID, r.ID, now
	}
	if err := k.store.AppendMessages(ctx, token, msgs...); err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	return nil
}

// metaFlag reads a boolean member of an event's metadata.kerneld.
func metaFlag(ev *session.Event, name string) bool {
	b, _ := metaMember(ev, name).(bool)
	return b
}

// metaReason reads metadata.kerneld.reason of an event.
func metaReason(ev *session.Event) string {
	s, _ := metaMember(ev, "reason").(string)
	return s
}

// metaStep reads metadata.kerneld.step, which the first event of each
// model call carries: the call's number within its run.
func metaStep(ev *session.Event) (int, bool) {
	n, ok := metaMember(ev, "step").(float64)
	return int(n), ok
}

// metaMember reads one member of an event's metadata.kerneld.
func metaMember(ev *session.Event, name string) any {
	if len(ev.Meta) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(ev.Meta, &m) != nil {
		return nil
	}
	return m[name]
}
