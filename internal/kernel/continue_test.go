package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// slowAnswer is what the slow agent says.
const slowAnswer = "a b c d e f g h i j k l m n o p q r s t u v w x y z"

// errKilled is what a killed process's store answers every write with.
var errKilled = errors.New("the process was killed")

// mortalStore is the store of one process that a test can kill: from
// then on every write fails, as a killed process writes nothing more,
// while the store beneath keeps what was written, for the next process.
type mortalStore struct {
	kernel.Store
	dead atomic.Bool
}

func (s *mortalStore) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.CreateRun(ctx, r, c)
}

func (s *mortalStore) UpdateRun(ctx context.Context, r session.Run) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.UpdateRun(ctx, r)
}

func (s *mortalStore) UpdateSession(ctx context.Context, sess session.Session) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.UpdateSession(ctx, sess)
}

func (s *mortalStore) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.AppendMessages(ctx, token, msgs...)
}

func (s *mortalStore) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.StartRun(ctx, token, st)
}

func (s *mortalStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.AppendEvents(ctx, token, evs)
}

func (s *mortalStore) PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error {
	if s.dead.Load() {
		return errKilled
	}
	return s.Store.PutMemory(ctx, e, maxEntries)
}

// process is one kerneld process of a test that kills it and starts the
// next on the same data.
type process struct {
	*kerneltest.Kernel
	rec   *recorder
	store *mortalStore
}

// startProcess starts a kernel on db, recovering what a previous process
// left.
func startProcess(t *testing.T, db kernel.Store, opts kerneltest.Options) process {
	t.Helper()
	ms := &mortalStore{Store: db}
	opts.Store = ms
	k, rec := newKernel(t, opts)
	_, err := k.Recover(t.Context())
	require.NoError(t, err)
	return process{Kernel: k, rec: rec, store: ms}
}

// kill kills p: it writes nothing more, and its goroutines are stopped.
// Its leases are let go, as the TTL would let them go.
func (p process) kill(t *testing.T) {
	t.Helper()
	p.store.dead.Store(true)
	closeKernel(t, p.Kernel.Kernel)
}

// customEvents returns the CUSTOM events named name among evs.
func customEvents(evs []session.Event, name string) []session.Event {
	var out []session.Event
	for _, ev := range evs {
		if ev.Type == session.EventCustom && ev.Member("name") == name {
			out = append(out, ev)
		}
	}
	return out
}

// customValue returns the value of a CUSTOM event.
func customValue(tb testing.TB, ev session.Event) map[string]any {
	tb.Helper()
	v, ok := ev.Fields()["value"].(map[string]any)
	require.True(tb, ok, "CUSTOM %s has no object value", ev.Member("name"))
	return v
}

// callIDsOf returns the ids of the calls of tool name started in evs.
func callIDsOf(tb testing.TB, evs []session.Event, name string) []string {
	tb.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type == session.EventToolCallStart && ev.Member("toolCallName") == name {
			out = append(out, ev.Member("toolCallId"))
		}
	}
	return out
}

// lastAnswer returns the content of the session's last assistant message.
func lastAnswer(tb testing.TB, k *kernel.Kernel, sessionID string) string {
	tb.Helper()
	var last string
	for _, m := range historyOf(tb, k, sessionID) {
		if m.Role == session.RoleAssistant {
			last = m.Content
		}
	}
	return last
}

// recordingFactory builds the scripted model of an agent file, recording
// every request any kernel's agent sends it.
type recordingFactory struct{ p recordingProvider }

func (f *recordingFactory) build(cfg llm.ModelConfig) (llm.Provider, error) {
	inner, err := scripted.New(cfg)
	if err != nil {
		return nil, err
	}
	f.p.mu.Lock()
	f.p.inner = inner
	f.p.mu.Unlock()
	return &f.p, nil
}

// TestContinue_CutModelCall kills a process while a model call streams:
// the next process continues the run from step 0, closing the cut message
// and naming it in kerneld.run.resumed, and makes the call again without
// the cut text in its request; the run ends with the whole answer, one
// RUN_STARTED and one RUN_FINISHED in a valid log, and a history holding
// the answer once.
func TestContinue_CutModelCall(t *testing.T) {
	rf := &recordingFactory{}
	opts := kerneltest.Options{
		Agents:    []string{"name: paced\nmodel: {provider: recording, token_delay: 20ms, script: [{text: \"" + slowAnswer + "\"}]}\n"},
		Providers: map[string]llm.Factory{"recording": rf.build},
	}
	db := memory.New()
	p1 := startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "paced")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "talk")
	p1.rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 5)
	p1.kill(t)
	before := len(rf.p.Requests())

	p2 := startProcess(t, db, opts)
	got := checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, slowAnswer)
	assert.Equal(t, 1, got.Crashes)
	reqs := rf.p.Requests()[before:]
	require.Len(t, reqs, 1, "one model call, made again")
	assert.Equal(t, 0, reqs[0].Turn)
	require.Len(t, reqs[0].Messages, 1, "the cut call's text is not sent as if it were complete: %+v", reqs[0].Messages)
	assert.Equal(t, "talk", reqs[0].Messages[0].Content)

	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	aguitest.Verify(t, evs)
	resumed := customEvents(evs, session.CustomRunResumed)
	require.Len(t, resumed, 1)
	v := customValue(t, resumed[0])
	assert.Equal(t, map[string]any{"runId": run.ID, "step": float64(0), "reason": session.ResumeCrash}, map[string]any{
		"runId": v["runId"], "step": v["step"], "reason": v["reason"]})
	cut := v["cutMessageIds"].([]any)
	require.Len(t, cut, 1)
	var texts []string
	for _, ev := range evs {
		if ev.Type == session.EventTextMessageStart && ev.Member("role") == "assistant" {
			texts = append(texts, ev.Member("messageId"))
		}
	}
	require.Len(t, texts, 2, "the cut message, then the one made again")
	assert.Equal(t, texts[0], cut[0])
	assert.Equal(t, []session.Role{session.RoleUser, session.RoleAssistant}, roles(historyOf(t, p2.Kernel.Kernel, s.ID)))
}

// countingTool blocks until released (or its context ends) and counts its
// calls: what a tool with side effects looks like to a crash.
type countingTool struct {
	name    string
	safe    bool
	calls   atomic.Int64
	started chan string
	release chan struct{}
	once    sync.Once
}

func newCountingTool(name string, safe bool, started chan string) *countingTool {
	return &countingTool{name: name, safe: safe, started: started, release: make(chan struct{})}
}

func (c *countingTool) Definition() tools.Definition {
	return tools.Definition{Name: c.name, Description: "Counts its calls.", Parameters: json.RawMessage(`{"type":"object"}`),
		RetrySafe: c.safe}
}

func (c *countingTool) Call(ctx context.Context, _ tools.Call) (string, error) {
	n := c.calls.Add(1)
	c.started <- c.name
	select {
	case <-c.release:
		return `"call ` + string(rune('0'+n)) + `"`, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *countingTool) Release() { c.once.Do(func() { close(c.release) }) }

// TestContinue_ToolCallsInFlight kills a process while four tool calls
// run: one whose tool is safe to retry, one whose tool is not, and one of
// each overridden by the agent file. The next process makes the safe ones
// again and answers the others with an error result saying they may or
// may not have taken effect; the model is then asked again with every
// result.
func TestContinue_ToolCallsInFlight(t *testing.T) {
	started := make(chan string, 16)
	tls := []*countingTool{
		newCountingTool("reads", true, started), newCountingTool("sends", false, started),
		newCountingTool("reads_but_never", true, started), newCountingTool("sends_but_safe", false, started),
	}
	opts := kerneltest.Options{
		Agents: []string{`
name: careful
model:
  provider: scripted
  script:
    - {text: "Working.", tool_calls: [{name: reads}, {name: sends}, {name: reads_but_never}, {name: sends_but_safe}]}
    - {text: "Finished."}
tools: [reads, sends, {name: reads_but_never, retry: never}, {name: sends_but_safe, retry: safe}]
`},
		Tools: []tools.Tool{tls[0], tls[1], tls[2], tls[3]},
	}
	db := memory.New()
	p1 := startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "careful")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "go")
	awaitStarted(t, started, 4)
	p1.kill(t)

	for _, tl := range tls {
		tl.Release()
	}
	p2 := startProcess(t, db, opts)
	checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Finished.")
	want := map[string]int64{"reads": 2, "sends": 1, "reads_but_never": 1, "sends_but_safe": 2}
	for _, tl := range tls {
		assert.Equal(t, want[tl.name], tl.calls.Load(), "calls of %s", tl.name)
	}
	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	for _, tl := range tls {
		ids := callIDsOf(t, evs, tl.name)
		require.Len(t, ids, 1, "the model called %s once", tl.name)
		result := resultOf(evs, ids[0])
		if want[tl.name] == 2 {
			assert.Equal(t, `"call 2"`, result, "%s was made again", tl.name)
		} else {
			assert.Contains(t, result, "may or may not have taken effect", "%s was not made again", tl.name)
		}
	}
	aguitest.Verify(t, evs)
	checkHistory(t, historyOf(t, p2.Kernel.Kernel, s.ID))
}

// awaitStarted waits for n tool calls to start.
func awaitStarted(t *testing.T, started <-chan string, n int) {
	t.Helper()
	for range n {
		select {
		case <-started:
		case <-time.After(waitTimeout):
			t.Fatalf("fewer than %d tool calls started", n)
		}
	}
}

// TestContinue_Limits: a run whose process dies under it every time is
// continued max_resumes times, then ends interrupted with code
// resume_limit; an agent with on_crash: interrupt has its run ended
// interrupted by the first process that takes it.
func TestContinue_Limits(t *testing.T) {
	opts := kerneltest.Options{Agents: []string{
		"name: fragile\nmax_resumes: 2\nmodel: {provider: scripted, token_delay: 20ms, script: [{text: \"" + slowAnswer + "\"}]}\n",
		"name: stubborn\non_crash: interrupt\nmodel: {provider: scripted, token_delay: 20ms, script: [{text: \"" + slowAnswer + "\"}]}\n",
	}}
	t.Run("max_resumes", func(t *testing.T) {
		db := memory.New()
		p := startProcess(t, db, opts)
		s := mustSession(t, p.Kernel.Kernel, "fragile")
		run := mustRun(t, p.Kernel.Kernel, s.ID, "talk")
		for crash := range 3 {
			p.rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)
			p.kill(t)
			p = startProcess(t, db, opts)
			if crash < 2 {
				require.Eventually(t, func() bool { return mustGetRun(t, p.Kernel.Kernel, s.ID, run.ID).Crashes == crash+1 },
					waitTimeout, time.Millisecond, "crash %d was not continued", crash+1)
			}
		}
		got := awaitEnd(t, p.Kernel.Kernel, s.ID, run.ID)
		assert.Equal(t, session.RunInterrupted, got.State)
		require.NotNil(t, got.Error)
		assert.Equal(t, session.ErrorCodeResumeLimit, got.Error.Code)
		assert.Equal(t, 2, got.Resumes)
		evs := logOf(t, p.Kernel.Kernel, s.ID)
		checkLog(t, s.ID, evs)
		aguitest.Verify(t, evs)
		assert.Equal(t, session.ErrorCodeResumeLimit, evs[len(evs)-1].Member("code"))
		assert.Len(t, customEvents(evs, session.CustomRunResumed), 2)
	})
	t.Run("on_crash interrupt, waiting for approval", func(t *testing.T) {
		gated := strings.Replace(kerneltest.Gated, "name: gated", "name: gated\non_crash: interrupt", 1)
		opts := kerneltest.Options{Agents: []string{gated}}
		db := memory.New()
		p := startProcess(t, db, opts)
		s := mustSession(t, p.Kernel.Kernel, "gated")
		run, pending := awaitApprovals(t, p.Kernel, p.rec, s.ID)
		p.kill(t)
		p = startProcess(t, db, opts)
		require.Eventually(t, func() bool { return mustGetRun(t, p.Kernel.Kernel, s.ID, run.ID).Resumes == 1 },
			waitTimeout, time.Millisecond, "a run waiting for a person waits again, whatever on_crash says")
		for _, a := range pending {
			_, err := p.Decide(t.Context(), s.ID, run.ID, a.ToolCallID, true, "")
			require.NoError(t, err)
		}
		checkContinued(t, p.Kernel.Kernel, s.ID, run.ID, "Done.")
	})
	t.Run("on_crash interrupt", func(t *testing.T) {
		db := memory.New()
		p := startProcess(t, db, opts)
		s := mustSession(t, p.Kernel.Kernel, "stubborn")
		run := mustRun(t, p.Kernel.Kernel, s.ID, "talk")
		p.rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)
		p.kill(t)
		p = startProcess(t, db, opts)
		got := awaitEnd(t, p.Kernel.Kernel, s.ID, run.ID)
		assert.Equal(t, session.RunInterrupted, got.State)
		require.NotNil(t, got.Error)
		assert.Equal(t, session.ErrorCodeInterrupted, got.Error.Code)
		assert.Zero(t, got.Resumes)
		evs := logOf(t, p.Kernel.Kernel, s.ID)
		checkLog(t, s.ID, evs)
		assert.Empty(t, customEvents(evs, session.CustomRunResumed))
	})
}

// TestContinue_Drain stops a process gracefully while runs are under way.
// A run in a tool call leaves once the call returns (its step boundary),
// a run waiting for approvals leaves at once, and the next process
// continues both with nothing cut. A run that does not reach a boundary
// within the drain budget is cut by Close and continued too.
func TestContinue_Drain(t *testing.T) {
	t.Run("at a step boundary", func(t *testing.T) {
		asked := make(chan struct{})
		kernel.OnDrainAsked(t, func() { close(asked) })
		db := memory.New()
		p1 := startProcess(t, db, kerneltest.Options{})
		s := mustSession(t, p1.Kernel.Kernel, "waiter")
		run := mustRun(t, p1.Kernel.Kernel, s.ID, "wait")
		<-p1.Wait.Started()
		drained := make(chan error, 1)
		go func() { drained <- p1.Drain(t.Context()) }()
		<-asked
		p1.Wait.Release()
		require.NoError(t, <-drained)
		left := mustGetRun(t, p1.Kernel.Kernel, s.ID, run.ID)
		assert.Equal(t, session.RunRunning, left.State)
		assert.Equal(t, session.ResumeShutdown, left.Handoff)
		closeKernel(t, p1.Kernel.Kernel)

		p2 := startProcess(t, db, kerneltest.Options{})
		got := checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Done.")
		assert.Zero(t, got.Crashes)
		assert.Empty(t, got.Handoff)
		resumed := customEvents(logOf(t, p2.Kernel.Kernel, s.ID), session.CustomRunResumed)
		require.Len(t, resumed, 1)
		v := customValue(t, resumed[0])
		assert.Equal(t, session.ResumeShutdown, v["reason"])
		assert.Equal(t, float64(1), v["step"])
		assert.Empty(t, v["cutMessageIds"])
	})
	t.Run("waiting for approval", func(t *testing.T) {
		db := memory.New()
		p1 := startProcess(t, db, kerneltest.Options{})
		s := mustSession(t, p1.Kernel.Kernel, "gated")
		run, pending := awaitApprovals(t, p1.Kernel, p1.rec, s.ID)
		require.NoError(t, p1.Drain(t.Context()))
		closeKernel(t, p1.Kernel.Kernel)

		p2 := startProcess(t, db, kerneltest.Options{})
		require.Eventually(t, func() bool { return mustGetRun(t, p2.Kernel.Kernel, s.ID, run.ID).Resumes == 1 },
			waitTimeout, time.Millisecond)
		for _, a := range pending {
			_, err := p2.Decide(t.Context(), s.ID, run.ID, a.ToolCallID, true, "")
			require.NoError(t, err)
		}
		checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Done.")
		assert.Zero(t, mustGetRun(t, p2.Kernel.Kernel, s.ID, run.ID).Crashes)
	})
	t.Run("past the budget", func(t *testing.T) {
		db := memory.New()
		p1 := startProcess(t, db, kerneltest.Options{})
		s := mustSession(t, p1.Kernel.Kernel, "waiter")
		run := mustRun(t, p1.Kernel.Kernel, s.ID, "wait")
		<-p1.Wait.Started()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p1.Drain(ctx), context.DeadlineExceeded)
		closeKernel(t, p1.Kernel.Kernel)
		assert.Equal(t, session.ResumeShutdown, mustGetRun(t, p1.Kernel.Kernel, s.ID, run.ID).Handoff)

		p2 := startProcess(t, db, kerneltest.Options{})
		checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Done.")
		evs := logOf(t, p2.Kernel.Kernel, s.ID)
		ids := callIDsOf(t, evs, "wait")
		require.Len(t, ids, 1)
		assert.Contains(t, resultOf(evs, ids[0]), "may or may not have taken effect")
		select {
		case <-p2.Wait.Started():
			t.Error("the cut wait call, not safe to retry, was made again")
		default:
		}
	})
}

// TestContinue_ReleasedToAnotherReplica shuts a replica down mid-run: it
// lets the session go and signals the others, and another replica
// continues the run at once. The lease TTL is far longer than the test's
// wait, so only the signal can explain the take-over.
func TestContinue_ReleasedToAnotherReplica(t *testing.T) {
	rs := replicasOn(t, memory.New(), 2, time.Hour)
	a, b := rs[0], rs[1]
	s := mustSession(t, a.Kernel.Kernel, "slow")
	run := mustRun(t, a.Kernel.Kernel, s.ID, "hi")
	a.rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 3)
	closeKernel(t, a.Kernel.Kernel) // no drain: cut mid-step

	got := awaitEnd(t, b.Kernel.Kernel, s.ID, run.ID)
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Equal(t, 1, got.Resumes)
	assert.Zero(t, got.Crashes)
	evs := logOf(t, b.Kernel.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	resumed := customEvents(evs, session.CustomRunResumed)
	require.Len(t, resumed, 1)
	assert.Equal(t, session.ResumeShutdown, customValue(t, resumed[0])["reason"])
	assert.Len(t, customValue(t, resumed[0])["cutMessageIds"], 1)
	assert.Equal(t, slowAnswer, lastAnswer(t, b.Kernel.Kernel, s.ID))
	assert.Equal(t, int64(1), b.Stats().TakeOvers)
}

// stepMarks returns the step each model call's first event of evs names.
func stepMarks(tb testing.TB, evs []session.Event) []float64 {
	tb.Helper()
	var out []float64
	for _, ev := range evs {
		if m := kerneldMeta(tb, ev); m["step"] != nil {
			out = append(out, m["step"].(float64))
		}
	}
	return slices.Clip(out)
}

// TestContinue_StepMarks: the first event of each model call names the
// call's number, which is how a continued run finds the call it cut.
func TestContinue_StepMarks(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "tooluser")
	runToEnd(t, k.Kernel, rec, s.ID, "what time is it?")
	assert.Equal(t, []float64{0, 1}, stepMarks(t, logOf(t, k.Kernel, s.ID)))
}

// TestContinue_SpawnedChild kills a process while a spawn_agent call
// waits for its child: the next process continues the child's run on its
// own and the parent's run follows that child, rather than start another,
// and answers with the child's answer.
func TestContinue_SpawnedChild(t *testing.T) {
	opts := kerneltest.Options{Agents: []string{kerneltest.Slow, `
name: delegator
model:
  provider: scripted
  script:
    - {text: "Asking slow.", tool_calls: [{name: spawn_agent, arguments: {agent: slow, input: "take your time"}}]}
    - {text: "Slow answered."}
tools: [spawn_agent]
child_agents: [slow]
`}}
	db := memory.New()
	p1 := startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "delegator")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "go")
	p1.rec.WaitEvents(t, s.ID, run.ID, session.EventSubagentStarted, 1)
	children, err := p1.Children(t.Context(), s.ID, kernel.PageRequest{})
	require.NoError(t, err)
	require.Len(t, children.Items, 1)
	child := children.Items[0]
	p1.rec.waitFor(t, "the child to stream its answer", func() bool {
		n := 0
		for _, ev := range p1.rec.events[child.ID] {
			if ev.Type == session.EventTextMessageContent {
				n++
			}
		}
		return n >= 3 // its echoed input, and two tokens of its answer
	})
	p1.kill(t)

	p2 := startProcess(t, db, opts)
	checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Slow answered.")
	children, err = p2.Children(t.Context(), s.ID, kernel.PageRequest{})
	require.NoError(t, err)
	assert.Len(t, children.Items, 1, "the continued run followed its child instead of starting another")
	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	calls := callIDsOf(t, evs, kernel.SpawnAgentTool)
	require.Len(t, calls, 1)
	assert.Equal(t, slowAnswer, resultOf(evs, calls[0]), "the spawn's result is the child's answer")
	assert.Len(t, customEvents(evs, session.CustomRunResumed), 1)
	aguitest.Verify(t, evs)
}

// TestContinue_LostSteer: a process recorded a steer as joining its run
// and died before it logged the steer's input. The run continued by the
// next process takes that input in, so it is not lost.
func TestContinue_LostSteer(t *testing.T) {
	db := memory.New()
	p1 := startProcess(t, db, kerneltest.Options{})
	s := mustSession(t, p1.Kernel.Kernel, "waiter")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "wait")
	<-p1.Wait.Started()
	p1.kill(t)
	steer := session.Run{ID: session.NewID(), SessionID: s.ID, State: session.RunSteered, Input: "and this too",
		CreatedAt: time.Now().UTC()}
	steer.IfBusy, steer.SteeredInto = string(kernel.BusySteer), run.ID
	require.NoError(t, db.CreateRun(t.Context(), steer, session.RunConstraints{}))

	p2 := startProcess(t, db, kerneltest.Options{})
	checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Done.")
	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	steered := customEvents(evs, "kerneld.run.steered")
	require.Len(t, steered, 1)
	assert.Equal(t, steer.ID, customValue(t, steered[0])["steerRunId"])
	var users []string
	for _, m := range historyOf(t, p2.Kernel.Kernel, s.ID) {
		if m.Role == session.RoleUser {
			users = append(users, m.Content)
		}
	}
	assert.Equal(t, []string{"wait", "and this too"}, users)
}
