package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// waitTimeout bounds every wait of a test. Runs of the test agents take
// milliseconds; this only turns a hang into a failure.
const waitTimeout = 10 * time.Second

// recorder is a kernel.Observer that keeps every event and session end it
// is shown, and lets a test wait for them. It is safe for concurrent use.
type recorder struct {
	mu      sync.Mutex
	events  map[string][]session.Event // by session id, in the order observed
	ended   map[string][]int64         // by session id: lastSeq of each ObserveSessionEnded
	changed chan struct{}              // closed and replaced on every observation
}

var _ kernel.Observer = (*recorder)(nil)

func newRecorder() *recorder {
	return &recorder{
		events:  make(map[string][]session.Event),
		ended:   make(map[string][]int64),
		changed: make(chan struct{}),
	}
}

// ObserveEvents implements kernel.Observer.
func (r *recorder) ObserveEvents(evs []session.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		ev.Data, ev.Meta = slices.Clone(ev.Data), slices.Clone(ev.Meta)
		r.events[ev.SessionID] = append(r.events[ev.SessionID], ev)
	}
	r.broadcast()
}

// ObserveSessionEnded implements kernel.Observer.
func (r *recorder) ObserveSessionEnded(sessionID string, lastSeq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended[sessionID] = append(r.ended[sessionID], lastSeq)
	r.broadcast()
}

func (r *recorder) broadcast() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor waits until cond, called with r locked, is true.
func (r *recorder) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, changed := cond(), r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
	}
}

// Events returns a copy of the events observed for a session.
func (r *recorder) Events(sessionID string) []session.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[sessionID])
}

// Ended returns the lastSeq of every ObserveSessionEnded for a session.
func (r *recorder) Ended(sessionID string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ended[sessionID])
}

// WaitRunEnd waits until the run's RUN_FINISHED or RUN_ERROR is observed
// and returns it.
func (r *recorder) WaitRunEnd(tb testing.TB, sessionID, runID string) session.Event {
	tb.Helper()
	var end session.Event
	r.waitFor(tb, "the end of run "+runID, func() bool {
		for _, ev := range r.events[sessionID] {
			if ev.RunID == runID && ev.Type.Ends() {
				end = ev
				return true
			}
		}
		return false
	})
	return end
}

// WaitEvents waits until n events of type typ of the run are observed.
func (r *recorder) WaitEvents(tb testing.TB, sessionID, runID string, typ session.EventType, n int) {
	tb.Helper()
	r.waitFor(tb, fmt.Sprintf("%d %s events of run %s", n, typ, runID), func() bool {
		c := 0
		for _, ev := range r.events[sessionID] {
			if ev.RunID == runID && ev.Type == typ {
				c++
			}
		}
		return c >= n
	})
}

// WaitEnded waits until the session's end has been observed.
func (r *recorder) WaitEnded(tb testing.TB, sessionID string) int64 {
	tb.Helper()
	var last int64
	r.waitFor(tb, "the end of session "+sessionID, func() bool {
		ends := r.ended[sessionID]
		if len(ends) == 0 {
			return false
		}
		last = ends[len(ends)-1]
		return true
	})
	return last
}

// clock is an adjustable time source for kernel.Config.Now, safe for use by
// run goroutines.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// newKernel returns a test kernel whose first observer is a recorder.
func newKernel(tb testing.TB, opts kerneltest.Options) (*kerneltest.Kernel, *recorder) {
	tb.Helper()
	rec := newRecorder()
	opts.Observers = append([]kernel.Observer{rec}, opts.Observers...)
	return kerneltest.New(tb, opts), rec
}

// mustSession creates a session of agent.
func mustSession(tb testing.TB, k *kernel.Kernel, agent string) session.Session {
	tb.Helper()
	s, err := k.CreateSession(tb.Context(), kernel.CreateSession{Agent: agent})
	require.NoError(tb, err, "create %s session", agent)
	return s
}

// startRun starts a run. A run's goroutine leaves the kernel's active set
// only after its end is observable; see TestKernel_Run "accepts input right
// after RUN_FINISHED". To keep other tests about their own subject,
// startRun retries while the session is busy with a run already recorded
// as ended.
func startRun(tb testing.TB, k *kernel.Kernel, sessionID string, req kernel.RunRequest) (session.Run, bool) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		run, replayed, err := k.Run(tb.Context(), sessionID, req)
		if err == nil {
			return run, replayed
		}
		active := activeRunID(err)
		if active == "" || time.Now().After(deadline) {
			require.NoError(tb, err, "run in session %s", sessionID)
		}
		prev, gerr := k.GetRun(tb.Context(), sessionID, active)
		require.NoError(tb, gerr)
		if !prev.State.Terminal() {
			require.NoError(tb, err, "run in session %s", sessionID)
		}
		time.Sleep(time.Millisecond)
	}
}

// activeRunID returns the active_run_id of a session_busy error, or "".
func activeRunID(err error) string {
	e, ok := errors.AsType[*errdefs.Error](err)
	if !ok || e.Code != "session_busy" {
		return ""
	}
	id, _ := e.Extra["active_run_id"].(string)
	return id
}

// mustRun starts a run with input.
func mustRun(tb testing.TB, k *kernel.Kernel, sessionID, input string) session.Run {
	tb.Helper()
	run, _ := startRun(tb, k, sessionID, kernel.RunRequest{Input: input})
	return run
}

// waitRun waits until a run has ended and its end is recorded: the run is
// terminal and its session no longer names it as active.
func waitRun(tb testing.TB, k *kernel.Kernel, rec *recorder, sessionID, runID string) session.Run {
	tb.Helper()
	rec.WaitRunEnd(tb, sessionID, runID)
	deadline := time.Now().Add(waitTimeout)
	for {
		run, err := k.GetRun(tb.Context(), sessionID, runID)
		require.NoError(tb, err)
		s, err := k.GetSession(tb.Context(), sessionID)
		require.NoError(tb, err)
		if run.State.Terminal() && s.ActiveRunID != runID {
			return run
		}
		if time.Now().After(deadline) {
			tb.Fatalf("run %s: state %s, session active run %q after %v", runID, run.State, s.ActiveRunID, waitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// runToEnd starts a run with input and waits until it has ended.
func runToEnd(tb testing.TB, k *kernel.Kernel, rec *recorder, sessionID, input string) session.Run {
	tb.Helper()
	run := mustRun(tb, k, sessionID, input)
	return waitRun(tb, k, rec, sessionID, run.ID)
}

// verifiedLog reads a session's whole event log and checks it against
// kerneld's stream rules (checkLog) and AG-UI's (aguitest.Verify).
func verifiedLog(tb testing.TB, k *kernel.Kernel, sessionID string) []session.Event {
	tb.Helper()
	evs := logOf(tb, k, sessionID)
	checkLog(tb, sessionID, evs)
	aguitest.Verify(tb, evs)
	return evs
}

// logOf reads a session's whole event log.
func logOf(tb testing.TB, k *kernel.Kernel, sessionID string) []session.Event {
	tb.Helper()
	var all []session.Event
	for {
		evs, err := k.Events(tb.Context(), sessionID, int64(len(all)), kernel.MaxEventPage)
		require.NoError(tb, err)
		all = append(all, evs...)
		if len(evs) < kernel.MaxEventPage {
			return all
		}
	}
}

// runEvents returns the events of one run.
func runEvents(evs []session.Event, runID string) []session.Event {
	var out []session.Event
	for _, ev := range evs {
		if ev.RunID == runID {
			out = append(out, ev)
		}
	}
	return out
}

// historyOf reads a session's whole conversation history.
func historyOf(tb testing.TB, k *kernel.Kernel, sessionID string) []session.Message {
	tb.Helper()
	return allPages(tb, func(page kernel.PageRequest) (kernel.Page[session.Message], error) {
		return k.Messages(tb.Context(), sessionID, page)
	})
}

// allRuns lists every run of a session, newest first.
func allRuns(tb testing.TB, k *kernel.Kernel, sessionID string) []session.Run {
	tb.Helper()
	return allPages(tb, func(page kernel.PageRequest) (kernel.Page[session.Run], error) {
		return k.ListRuns(tb.Context(), sessionID, page)
	})
}

// allPages follows a listing's cursors from the first page to the last
// and returns every item.
func allPages[T any](tb testing.TB, list func(kernel.PageRequest) (kernel.Page[T], error)) []T {
	tb.Helper()
	var all []T
	page := kernel.PageRequest{Limit: kernel.MaxPageSize}
	for {
		p, err := list(page)
		require.NoError(tb, err)
		all = append(all, p.Items...)
		if p.Next == "" {
			return all
		}
		page.Cursor = p.Next
	}
}

// roles returns the roles of msgs.
func roles(msgs []session.Message) []session.Role {
	out := make([]session.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// types returns the types of evs.
func types(evs []session.Event) []session.EventType {
	out := make([]session.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// wire decodes an event's wire form, envelope included.
func wire(tb testing.TB, ev session.Event) map[string]any {
	tb.Helper()
	b, err := ev.MarshalJSON()
	require.NoError(tb, err)
	var m map[string]any
	require.NoError(tb, json.Unmarshal(b, &m), "wire form %s", b)
	return m
}

// kerneldMeta returns metadata.kerneld of an event's wire form.
func kerneldMeta(tb testing.TB, ev session.Event) map[string]any {
	tb.Helper()
	md, _ := wire(tb, ev)["metadata"].(map[string]any)
	k, _ := md["kerneld"].(map[string]any)
	require.NotNil(tb, k, "event %s has no metadata.kerneld", ev.Type)
	return k
}

// isErrorResult reports whether a TOOL_CALL_RESULT says the call failed.
func isErrorResult(tb testing.TB, ev session.Event) bool {
	tb.Helper()
	b, _ := kerneldMeta(tb, ev)["isError"].(bool)
	return b
}

// usageOf returns the total token count of a RUN_FINISHED or RUN_ERROR.
func usageOf(tb testing.TB, ev session.Event) (input, output float64) {
	tb.Helper()
	u, _ := ev.Fields()["usage"].([]any)
	require.Len(tb, u, 1, "usage of %s: %s", ev.Type, ev.Data)
	m, _ := u[0].(map[string]any)
	in, _ := m["inputTokens"].(float64)
	out, _ := m["outputTokens"].(float64)
	return in, out
}

// outcomeOf returns the outcome type of a RUN_FINISHED.
func outcomeOf(ev session.Event) string {
	o, _ := ev.Fields()["outcome"].(map[string]any)
	s, _ := o["type"].(string)
	return s
}

// requireCode fails unless err is of kind with the given code.
func requireCode(tb testing.TB, err error, kind error, code string) {
	tb.Helper()
	require.Error(tb, err)
	require.ErrorIs(tb, err, kind, "error %v", err)
	require.Equal(tb, code, string(errdefs.CodeOf(err)), "code of %v", err)
}

// checkLog checks kerneld's stream shape (DESIGN.md §4) on a session's log
// in Go, for logs too many to hand to the AG-UI checker one by one: seqs
// 1..N without gaps; every event inside a run opened by RUN_STARTED and
// closed by one RUN_FINISHED or RUN_ERROR; everything a run opened closed
// before its end; every tool call ended and answered; no empty delta.
func checkLog(tb testing.TB, sessionID string, evs []session.Event) {
	tb.Helper()
	if err := logProblem(sessionID, evs); err != nil {
		tb.Errorf("session %s log: %v\ntypes: %v", sessionID, err, types(evs))
	}
}

type toolCallState struct{ ended, answered bool }

// openKey names what an event opens, closes or writes to: a text message, a
// reasoning message or a reasoning span (which share message ids).
func openKey(t session.EventType, messageID string) string {
	switch t {
	case session.EventTextMessageStart, session.EventTextMessageContent, session.EventTextMessageEnd:
		return "text " + messageID
	case session.EventReasoningStart, session.EventReasoningEnd:
		return "reasoning span " + messageID
	}
	return "reasoning message " + messageID
}

func logProblem(sessionID string, evs []session.Event) error {
	if len(evs) == 0 {
		return errors.New("empty")
	}
	var (
		runID string
		open  map[string]bool // text and reasoning messages and spans, by kind+id
		calls map[string]*toolCallState
	)
	for i, ev := range evs {
		at := fmt.Sprintf("event %d (%s)", i, ev.Type)
		if ev.Seq != int64(i+1) {
			return fmt.Errorf("%s: seq %d, want %d", at, ev.Seq, i+1)
		}
		if ev.SessionID != sessionID {
			return fmt.Errorf("%s: session %q", at, ev.SessionID)
		}
		if ev.Type == session.EventRunStarted {
			if runID != "" {
				return fmt.Errorf("%s: run starts while %s is open", at, runID)
			}
			if ev.Member("runId") != ev.RunID || ev.Member("threadId") != sessionID {
				return fmt.Errorf("%s: names run %q thread %q", at, ev.Member("runId"), ev.Member("threadId"))
			}
			runID, open, calls = ev.RunID, map[string]bool{}, map[string]*toolCallState{}
			continue
		}
		if runID == "" {
			return fmt.Errorf("%s: outside a run", at)
		}
		if ev.RunID != runID {
			return fmt.Errorf("%s: stamped run %q inside run %q", at, ev.RunID, runID)
		}
		msg, call := ev.Member("messageId"), ev.Member("toolCallId")
		switch ev.Type {
		case session.EventTextMessageStart, session.EventReasoningMessageStart, session.EventReasoningStart:
			open[openKey(ev.Type, msg)] = true
		case session.EventTextMessageEnd, session.EventReasoningMessageEnd, session.EventReasoningEnd:
			key := openKey(ev.Type, msg)
			if !open[key] {
				return fmt.Errorf("%s: closes %s, which is not open", at, msg)
			}
			delete(open, key)
		case session.EventTextMessageContent, session.EventReasoningMessageContent:
			if ev.Member("delta") == "" {
				return fmt.Errorf("%s: empty delta", at)
			}
			if !open[openKey(ev.Type, msg)] {
				return fmt.Errorf("%s: content for %s, which is not open", at, msg)
			}
		case session.EventToolCallStart:
			if calls[call] != nil {
				return fmt.Errorf("%s: tool call %s starts twice", at, call)
			}
			calls[call] = &toolCallState{}
		case session.EventToolCallArgs, session.EventToolCallEnd:
			c := calls[call]
			if c == nil || c.ended {
				return fmt.Errorf("%s: tool call %s is not streaming", at, call)
			}
			c.ended = ev.Type == session.EventToolCallEnd
		case session.EventToolCallResult:
			c := calls[call]
			if c == nil || !c.ended || c.answered {
				return fmt.Errorf("%s: result for tool call %s, which is not ended or already answered", at, call)
			}
			c.answered = true
		case session.EventRunFinished, session.EventRunError:
			if len(open) > 0 {
				return fmt.Errorf("%s: run %s ends with %v open", at, runID, open)
			}
			for id, c := range calls {
				if !c.answered {
					return fmt.Errorf("%s: run %s ends with tool call %s unanswered", at, runID, id)
				}
			}
			if ev.Type == session.EventRunFinished && (ev.Member("runId") != runID || ev.Member("threadId") != sessionID) {
				return fmt.Errorf("%s: names run %q thread %q", at, ev.Member("runId"), ev.Member("threadId"))
			}
			runID = ""
		}
	}
	if runID != "" {
		return fmt.Errorf("the log ends with run %s open", runID)
	}
	return nil
}

// checkHistory fails unless msgs form a valid conversation: every tool
// message answers a call of an earlier assistant message, and every tool
// call is answered exactly once.
func checkHistory(tb testing.TB, msgs []session.Message) {
	tb.Helper()
	conv := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		conv[i] = llm.Message{Role: llm.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			conv[i].ToolCalls = append(conv[i].ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
	}
	if err := conversationProblem(conv); err != nil {
		tb.Errorf("history: %v\nroles: %v", err, roles(msgs))
	}
}

// conversationProblem says what makes msgs an invalid model conversation,
// the way chat APIs judge one: a tool message must answer a call made by an
// earlier assistant message of the same conversation, and every call must
// be answered once before the next user or assistant message.
func conversationProblem(msgs []llm.Message) error {
	unanswered := map[string]bool{}
	known := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleTool:
			if !known[m.ToolCallID] {
				return fmt.Errorf("message %d answers tool call %q, which no earlier assistant message made", i, m.ToolCallID)
			}
			if !unanswered[m.ToolCallID] {
				return fmt.Errorf("message %d answers tool call %q again", i, m.ToolCallID)
			}
			delete(unanswered, m.ToolCallID)
		default:
			if len(unanswered) > 0 {
				return fmt.Errorf("message %d (%s) follows unanswered tool calls %v", i, m.Role, unanswered)
			}
			for _, c := range m.ToolCalls {
				known[c.ID], unanswered[c.ID] = true, true
			}
		}
	}
	if len(unanswered) > 0 {
		return fmt.Errorf("tool calls %v are never answered", unanswered)
	}
	return nil
}

// recordingProvider is a model that records every request it gets and
// answers with an inner provider.
type recordingProvider struct {
	inner llm.Provider
	mu    sync.Mutex
	reqs  []llm.Request
}

// Stream implements llm.Provider.
func (p *recordingProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	req.Messages = slices.Clone(req.Messages)
	for i := range req.Messages {
		req.Messages[i].ToolCalls = slices.Clone(req.Messages[i].ToolCalls)
	}
	req.Tools = slices.Clone(req.Tools)
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return p.inner.Stream(ctx, req, emit)
}

// Requests returns the requests seen so far.
func (p *recordingProvider) Requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// step is one step of a scripted model's script.
type step struct {
	Text      string
	ToolCalls []scriptedCall
}

type scriptedCall struct {
	Name      string
	Arguments map[string]any
}

// recordingModel returns a recording provider answering with the script.
func recordingModel(tb testing.TB, script ...step) *recordingProvider {
	tb.Helper()
	steps := make([]any, len(script))
	for i, st := range script {
		m := map[string]any{}
		if st.Text != "" {
			m["text"] = st.Text
		}
		if len(st.ToolCalls) > 0 {
			calls := make([]any, len(st.ToolCalls))
			for j, c := range st.ToolCalls {
				call := map[string]any{"name": c.Name}
				if c.Arguments != nil {
					call["arguments"] = c.Arguments
				}
				calls[j] = call
			}
			m["tool_calls"] = calls
		}
		steps[i] = m
	}
	inner, err := scripted.New(llm.ModelConfig{Provider: "scripted", Options: map[string]any{"script": steps}})
	require.NoError(tb, err)
	return &recordingProvider{inner: inner}
}

// newSpecKernel builds a kernel by hand around agents defined in Go, with
// the memory store, the built-in tools and the test tools, and closes it
// when the test ends.
func newSpecKernel(tb testing.TB, limits kernel.Limits, specs ...agents.Spec) (*kernel.Kernel, *recorder, *kerneltest.WaitTool) {
	tb.Helper()
	return newConfiguredKernel(tb, kernel.Config{Limits: limits}, specs...)
}

// newConfiguredKernel is newSpecKernel with more of the kernel's config:
// cfg's agents, tools, store and observers are set here.
func newConfiguredKernel(tb testing.TB, cfg kernel.Config, specs ...agents.Spec) (*kernel.Kernel, *recorder, *kerneltest.WaitTool) {
	tb.Helper()
	wait := kerneltest.NewWaitTool()
	reg := tools.NewRegistry(append(tools.Builtins(), wait, kerneltest.FailTool{})...)
	registry, err := agents.NewRegistry(agents.Options{KnownTool: reg.Has}, specs...)
	require.NoError(tb, err)
	rec := newRecorder()
	cfg.Agents, cfg.Tools, cfg.Store, cfg.Observers = registry, reg, memory.New(), []kernel.Observer{rec}
	k, err := kernel.New(cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			tb.Errorf("close kernel: %v", err)
		}
	})
	return k, rec, wait
}

// toolRefs lists tools an agent may call.
func toolRefs(names ...string) []agents.ToolRef {
	out := make([]agents.ToolRef, len(names))
	for i, n := range names {
		out[i] = agents.ToolRef{Name: n}
	}
	return out
}
