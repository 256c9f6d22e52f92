package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// aguiInput is AG-UI 1.0's RunAgentInput, the body a stock AG-UI client
// (HttpAgent, CopilotKit) posts. Like AG-UI's own schema it is loose:
// members it does not define are ignored, so newer clients still work.
// The parts kerneld reads are checked member by member, so a problem
// names its field (messages[2].role).
type aguiInput struct {
	ThreadID        *string           `json:"threadId"`
	RunID           *string           `json:"runId"`
	ProtocolVersion *string           `json:"protocolVersion"`
	State           json.RawMessage   `json:"state"`
	Messages        []json.RawMessage `json:"messages"`
	Tools           []json.RawMessage `json:"tools"`
	Context         []json.RawMessage `json:"context"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps"`
	Resume          []json.RawMessage `json:"resume"`
}

// aguiMessage is the part of an AG-UI message kerneld compares and takes.
type aguiMessage struct {
	ID         *string         `json:"id"`
	Role       *string         `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID *string         `json:"toolCallId"`
}

// aguiRun is a RunAgentInput, checked and read.
type aguiRun struct {
	threadID, runID string
	// legacy: the client declares no AG-UI protocol version of 1.0 or
	// later (see legacyClient).
	legacy   bool
	messages []clientMessage
	context  []session.ContextEntry
	state    json.RawMessage // nil: the client sent none
	ifBusy   string
	resume   []resumeAnswer
	tools    []session.ClientTool
}

// clientMessage is one message of the client's copy of the thread.
type clientMessage struct {
	id, role, text string
	images         []imagePart // of a user message
	toolCallID     string      // of a tool message
	index          int         // in the request's messages
}

// handleAGUIRun handles "POST /agents/{name}/agui": one AG-UI run. The
// thread is the session of the caller's tenant with id threadId, created
// for agent {name} on first use. kerneld keeps the history: of messages it
// takes the new user message, the run's input; a list that contradicts
// the history is a conflict. The answer is the run's events as SSE, the
// frames of the inline run stream; a runId seen before replays its run.
// Every problem is found before the first byte of the stream.
func (s *Server) handleAGUIRun(w http.ResponseWriter, r *http.Request) error {
	in, err := readAGUIInput(r)
	if err != nil {
		return err
	}
	sess, _, err := s.kernel.EnsureSession(r.Context(), kernel.CreateSession{Agent: r.PathValue("name"), ID: in.threadID})
	if err != nil {
		return err
	}
	if len(in.resume) > 0 {
		// An answer applies or is refused, whatever its runId: never replayed.
		return s.resumeAGUI(w, r, sess, in)
	}
	if run, err := s.kernel.GetRun(r.Context(), sess.ID, in.runID); err == nil {
		// A retried runId: its run, replayed from its start.
		w.Header().Set("Idempotent-Replayed", "true")
		return s.streamAGUI(w, r, run, in.legacy)
	} else if errdefs.CodeOf(err) != errdefs.CodeRunNotFound {
		return err
	}
	history, err := s.history(r, sess.ID)
	if err != nil {
		return err
	}
	own, err := s.agentToolNames(r)
	if err != nil {
		return err
	}
	input, results, err := newRunInput(in.messages, history, openClientCalls(history, own))
	if err != nil {
		return err
	}
	field := fmt.Sprintf("messages[%d].content", input.index)
	imgs, err := s.readImages(input.images, field)
	if err != nil {
		return err
	}
	clientTools, err := s.clientTools(r, in.tools, own)
	if err != nil {
		return err
	}
	run, _, err := s.kernel.Run(r.Context(), sess.ID, kernel.RunRequest{
		Input: input.text, Images: imgs, IfBusy: kernel.BusyPolicy(in.ifBusy), ID: in.runID,
		IdempotencyKey: "agui:" + in.runID, // a retry racing this request finds this run
		Source:         session.RunSourceAGUI,
		AGUI: kernel.AGUIRun{UserMessageID: input.id, Context: in.context, AgentState: in.state,
			ClientTools: clientTools, ToolResults: results},
	})
	if err != nil {
		return err
	}
	return s.streamAGUI(w, r, run, in.legacy)
}

// streamAGUI streams run's events as the inline run stream does, without
// the content of the user message the client sent: it has that already.
// legacy presents the run to a client older than AG-UI 1.0.
func (s *Server) streamAGUI(w http.ResponseWriter, r *http.Request, run session.Run, legacy bool) error {
	after, err := s.streamStart(r, run)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+session.PublicID(run.SessionID)+"/runs/"+run.ID)
	req := streamRequest{sessionID: run.SessionID, after: after, runID: run.ID, aguiView: s.newAGUIView(run, run.ID, legacy)}
	if run.UserMessageID != "" {
		req.quiet = append(req.quiet, []byte(`"messageId":`+strconv.Quote(run.UserMessageID)))
	}
	for _, t := range run.ToolResults {
		req.quiet = append(req.quiet, []byte(`"messageId":`+strconv.Quote(t.MessageID)))
	}
	return s.streams.serve(w, r, s.kernel, req)
}

// history returns the whole stored conversation of session id.
func (s *Server) history(r *http.Request, id string) ([]session.Message, error) {
	var out []session.Message
	page := kernel.PageRequest{Limit: 200}
	for {
		p, err := s.kernel.Messages(r.Context(), id, page)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Items...)
		if p.Next == "" {
			return out, nil
		}
		page.Cursor = p.Next
	}
}

// newRunInput compares the client's messages with the stored history
// and returns the run's input: the new user message, if any, and the
// results of client tool calls the new tool messages carry. Messages
// kerneld has (by id) must keep their order, text and place: an edited,
// removed or reordered message is a conflict, as is a message kerneld
// cannot take (a new assistant or system message, a tool message that
// answers no open call). Reasoning and activity messages are the
// client's own view and are not compared.
//
// open are the calls waiting for the client's results: each must be
// answered, or the model would see a call without its result.
func newRunInput(msgs []clientMessage, history []session.Message, open map[string]bool) (clientMessage, []session.ToolResult, error) {
	fresh, err := freshMessages(msgs, history)
	if err != nil {
		return clientMessage{}, nil, err
	}
	var input clientMessage
	var results []session.ToolResult
	for _, m := range fresh {
		switch {
		case m.role == "tool" && open[m.toolCallID]:
			delete(open, m.toolCallID)
			results = append(results, session.ToolResult{MessageID: m.id, ToolCallID: m.toolCallID, Content: m.text})
		case m.role == "tool":
			return clientMessage{}, nil, historyConflict("messages[%d] (%s) answers tool call %q, which is not waiting for a result", m.index, m.id, m.toolCallID)
		case m.role != "user":
			return clientMessage{}, nil, historyConflict("messages[%d] (%s, %s) is not in the thread's history; kerneld keeps the history and takes only new user and tool messages", m.index, m.id, m.role)
		case input.id != "":
			return clientMessage{}, nil, errdefs.Invalid(fmt.Sprintf("messages[%d]", m.index), "one new user message per run")
		default:
			input = m
		}
	}
	if len(open) > 0 {
		return clientMessage{}, nil, historyConflict("the client tool calls %s have no result: send a tool message answering each", strings.Join(slices.Sorted(maps.Keys(open)), ", "))
	}
	if input.id == "" && len(results) == 0 {
		return clientMessage{}, nil, errdefs.Invalid("messages", "no new user message: the last one must be a user message kerneld does not have yet")
	}
	if input.id != "" && input.text == "" && len(input.images) == 0 {
		return clientMessage{}, nil, errdefs.Invalid(fmt.Sprintf("messages[%d].content", input.index), "empty")
	}
	return input, results, nil
}

// freshMessages returns the client's messages kerneld does not have, in
// order, checking that those it has agree with the history.
func freshMessages(msgs []clientMessage, history []session.Message) ([]clientMessage, error) {
	pos := make(map[string]int, len(history))
	for i, m := range history {
		pos[m.ID] = i
	}
	var fresh []clientMessage
	last := -1
	for _, m := range msgs {
		if m.role == "reasoning" || m.role == "activity" {
			continue
		}
		i, known := pos[m.id]
		switch {
		case !known:
			fresh = append(fresh, m)
			continue
		case len(fresh) > 0:
			return nil, historyConflict("messages[%d] (%s) comes after messages kerneld does not have", m.index, m.id)
		case i < last:
			return nil, historyConflict("messages[%d] (%s) is out of order", m.index, m.id)
		case last >= 0 && i > last+1 && hasVisible(history[last+1:i]):
			return nil, historyConflict("messages before messages[%d] (%s) were removed", m.index, m.id)
		case edited(m, history[i]):
			return nil, historyConflict("messages[%d] (%s) was edited", m.index, m.id)
		}
		last = i
	}
	return fresh, nil
}

// hasVisible reports whether msgs hold a message a client shows, one
// whose absence from its copy means it was removed there.
func hasVisible(msgs []session.Message) bool {
	for _, m := range msgs {
		if m.Role == session.RoleUser || m.Role == session.RoleAssistant {
			return true
		}
	}
	return false
}

// edited reports whether the client's copy of a stored message says
// something else: another role, or for a user message another text.
func edited(m clientMessage, stored session.Message) bool {
	if m.role != string(stored.Role) {
		return true
	}
	return stored.Role == session.RoleUser && m.text != stored.Content
}

// historyConflict is a 409 saying how a client's messages contradict the
// stored history.
func historyConflict(format string, args ...any) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeHistoryConflict,
		"messages contradict the thread's history: "+format+
			"; kerneld keeps the history, so send it as received, plus the new user message (to edit, fork the thread: POST /sessions/{id}/fork)", args...)
}

// readAGUIInput reads and checks a RunAgentInput.
func readAGUIInput(r *http.Request) (aguiRun, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return aguiRun{}, readError(err)
	}
	var in aguiInput
	if err := readJSON(body, &in, looseJSON); err != nil {
		return aguiRun{}, err
	}
	return in.check()
}

// check validates in, collecting a problem per field.
func (in aguiInput) check() (aguiRun, error) {
	var v *errdefs.ValidationError
	out := aguiRun{}
	out.threadID, v = clientIDField(v, "threadId", in.ThreadID)
	out.runID, v = clientIDField(v, "runId", in.RunID)
	out.legacy = legacyClient(in.ProtocolVersion)
	if in.Messages == nil {
		v = v.Add("messages", "required")
	}
	for i, raw := range in.Messages {
		m, err := readMessage(i, raw)
		if err != nil {
			v = v.Add(err.field, err.problem)
			continue
		}
		out.messages = append(out.messages, m)
	}
	for i, raw := range in.Context {
		var c struct {
			Description *string `json:"description"`
			Value       *string `json:"value"`
		}
		if err := unmarshalPart(raw, &c, looseJSON); err != nil || c.Description == nil || c.Value == nil {
			v = v.Add(fmt.Sprintf("context[%d]", i), "must be an object with string description and value")
			continue
		}
		out.context = append(out.context, session.ContextEntry{Description: *c.Description, Value: *c.Value})
	}
	for i, raw := range in.Tools {
		t, err := readTool(i, raw)
		if err != nil {
			v = v.Add(err.field, err.problem)
			continue
		}
		out.tools = append(out.tools, t)
	}
	v = duplicateTools(v, out.tools)
	for i, raw := range in.Resume {
		a, err := readResume(i, raw)
		if err != nil {
			v = v.Add(err.field, err.problem)
			continue
		}
		out.resume = append(out.resume, a)
	}
	if len(in.State) > 0 && !bytes.Equal(in.State, []byte("null")) {
		out.state = in.State
	}
	ifBusy, err := forwardedIfBusy(in.ForwardedProps)
	if err != nil {
		v = v.Add(err.field, err.problem)
	}
	out.ifBusy = ifBusy
	return out, v.Err()
}

// clientIDField checks a required id field of the client's choosing.
func clientIDField(v *errdefs.ValidationError, field string, id *string) (string, *errdefs.ValidationError) {
	switch {
	case id == nil:
		return "", v.Add(field, "required")
	case !session.ValidClientID(*id):
		return "", v.Add(field, "must be 1 to 128 characters of [A-Za-z0-9._:-]")
	}
	return *id, v
}

// fieldProblem is one problem with one field of a RunAgentInput.
type fieldProblem struct{ field, problem string }

// readMessage reads messages[i].
func readMessage(i int, raw json.RawMessage) (clientMessage, *fieldProblem) {
	at := func(f string) string { return fmt.Sprintf("messages[%d]%s", i, f) }
	var m aguiMessage
	if err := unmarshalPart(raw, &m, looseJSON); err != nil {
		return clientMessage{}, &fieldProblem{at(""), "must be an AG-UI message object"}
	}
	switch {
	case m.ID == nil || !session.ValidClientID(*m.ID):
		return clientMessage{}, &fieldProblem{at(".id"), "must be 1 to 128 characters of [A-Za-z0-9._:-]"}
	case m.Role == nil:
		return clientMessage{}, &fieldProblem{at(".role"), "required"}
	}
	out := clientMessage{id: *m.ID, role: *m.Role, index: i}
	switch out.role {
	case "user":
		c, problem := readContent(at(".content"), m.Content, looseJSON)
		if problem != nil {
			return clientMessage{}, problem
		}
		out.text, out.images = c.text, c.images
	case "system", "developer":
		text, ok := messageText(m.Content)
		if !ok {
			return clientMessage{}, &fieldProblem{at(".content"), "must be a string or a list of content parts"}
		}
		out.text = text
	case "assistant", "reasoning", "activity":
	case "tool":
		if m.ToolCallID == nil {
			return clientMessage{}, &fieldProblem{at(".toolCallId"), "required"}
		}
		text, ok := messageText(m.Content)
		if !ok {
			return clientMessage{}, &fieldProblem{at(".content"), "must be a string or a list of content parts"}
		}
		out.text, out.toolCallID = text, *m.ToolCallID
	default:
		return clientMessage{}, &fieldProblem{at(".role"), "must be user, assistant, tool, system, developer, reasoning or activity"}
	}
	return out, nil
}

// forwardedIfBusy reads forwardedProps.kerneld.if_busy. Other members of
// forwardedProps are the client's business; kerneld's are checked.
func forwardedIfBusy(props json.RawMessage) (string, *fieldProblem) {
	var fp struct {
		Kerneld json.RawMessage `json:"kerneld"`
	}
	if len(props) == 0 || unmarshalPart(props, &fp, looseJSON) != nil || len(fp.Kerneld) == 0 || bytes.Equal(fp.Kerneld, []byte("null")) {
		return "", nil
	}
	var k struct {
		IfBusy string `json:"if_busy"`
	}
	if err := unmarshalPart(fp.Kerneld, &k, strictJSON); err != nil {
		return "", &fieldProblem{"forwardedProps.kerneld", "must be an object with if_busy only"}
	}
	switch kernel.BusyPolicy(k.IfBusy) {
	case "", kernel.BusyReject, kernel.BusyQueue, kernel.BusyInterrupt, kernel.BusySteer:
		return k.IfBusy, nil
	}
	return "", &fieldProblem{"forwardedProps.kerneld.if_busy", `must be one of "reject", "queue", "interrupt", "steer"`}
}
