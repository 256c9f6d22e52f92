package kernel_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// fakeGuards is a guard service that records what it is asked and answers
// as the test sets it: by tool name for tool calls, once for runs.
type fakeGuards struct {
	mu      sync.Mutex
	onCall  map[string]guard.Decision // by tool name; allow when absent
	onRun   guard.Decision
	calls   []guard.ToolCall
	resumes []*guard.Resume // of every before_run request, nil for a run's start
}

var _ kernel.Guards = (*fakeGuards)(nil)

func (g *fakeGuards) CheckToolCall(_ context.Context, _ agents.GuardSpec, _ guard.Session, _ string, call guard.ToolCall) guard.Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, call)
	if d, ok := g.onCall[call.Name]; ok {
		return d
	}
	return guard.Decision{Action: guard.Allow}
}

func (g *fakeGuards) CheckRun(_ context.Context, _ agents.GuardSpec, _ guard.Session, _, _ string, resume *guard.Resume) guard.Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.resumes = append(g.resumes, resume)
	return cmpOr(g.onRun, guard.Decision{Action: guard.Allow})
}

func cmpOr(d, def guard.Decision) guard.Decision {
	if d.Action == "" {
		return def
	}
	return d
}

// set changes the guard's answers.
func (g *fakeGuards) set(onCall map[string]guard.Decision, onRun guard.Decision) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onCall, g.onRun, g.calls, g.resumes = onCall, onRun, nil, nil
}

// asked returns the tool calls and runs the guard was asked about.
func (g *fakeGuards) asked() ([]guard.ToolCall, []*guard.Resume) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]guard.ToolCall(nil), g.calls...), append([]*guard.Resume(nil), g.resumes...)
}

// echoArgsTool blocks until released (or its context ends), then answers
// with the arguments it was called with; it is safe to retry.
type echoArgsTool struct {
	name    string
	started chan string
	release chan struct{}
	once    sync.Once
}

func (e *echoArgsTool) Definition() tools.Definition {
	return tools.Definition{Name: e.name, Description: "Echoes its arguments.", Parameters: json.RawMessage(`{"type":"object"}`),
		RetrySafe: true}
}

func (e *echoArgsTool) Call(ctx context.Context, c tools.Call) (string, error) {
	e.started <- e.name
	select {
	case <-e.release:
		return string(c.Arguments), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (e *echoArgsTool) Release() { e.once.Do(func() { close(e.release) }) }

// guardedDecisions returns the values of the run's kerneld.guard.decided
// events.
func guardedDecisions(t *testing.T, evs []session.Event) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range customEvents(evs, kernel.GuardDecided) {
		out = append(out, customValue(t, ev))
	}
	return out
}

// TestContinue_AsksTheGuardAgain kills a process while two guarded tool
// calls run. The next process asks the before_run guard again, saying the
// run is resumed and from where, then asks the tool guard about each call
// before making it again: one it now denies is answered with its denial
// and not made; one it rewrites is made with the new arguments. Every
// decision is in the log.
func TestContinue_AsksTheGuardAgain(t *testing.T) {
	started := make(chan string, 8)
	lookup, fetch := &echoArgsTool{name: "lookup", started: started, release: make(chan struct{})},
		&echoArgsTool{name: "fetch", started: started, release: make(chan struct{})}
	g := &fakeGuards{}
	opts := kerneltest.Options{
		Agents: []string{`
name: guarded
model:
  provider: scripted
  script:
    - {text: "Looking.", tool_calls: [{name: lookup, arguments: {q: "a"}}, {name: fetch, arguments: {url: "b"}}]}
    - {text: "Finished."}
tools: [lookup, fetch]
guard: {url: "https://policy.example.com/", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", before_run: true}
`},
		Tools:  []tools.Tool{lookup, fetch},
		Guards: g,
	}
	db := memory.New()
	p1 := startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "guarded")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "go")
	awaitStarted(t, started, 2)
	calls, resumes := g.asked()
	require.Len(t, calls, 2, "both calls guarded before they ran")
	require.Equal(t, []*guard.Resume{nil}, resumes, "the run's start guarded")
	p1.kill(t)

	g.set(map[string]guard.Decision{
		"lookup": {Action: guard.Deny, Reason: "lookups are off now"},
		"fetch":  {Action: guard.Rewrite, Arguments: json.RawMessage(`{"url":"c"}`)},
	}, guard.Decision{Action: guard.Allow})
	lookup.Release()
	fetch.Release()
	p2 := startProcess(t, db, opts)
	checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Finished.")

	calls, resumes = g.asked()
	require.Len(t, resumes, 1)
	assert.Equal(t, &guard.Resume{Step: 1, Reason: session.ResumeCrash}, resumes[0], "the continued run is guarded again")
	require.Len(t, calls, 2, "each call made again is guarded again")
	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	for _, c := range calls {
		switch c.Name {
		case "lookup":
			assert.Equal(t, "denied by the guard: lookups are off now", resultOf(evs, c.ID))
		case "fetch":
			assert.JSONEq(t, `{"url":"c"}`, resultOf(evs, c.ID), "made again with the rewritten arguments")
		}
	}
	ds := guardedDecisions(t, evs)
	require.Len(t, ds, 6, "before_run and two calls, at the start and again")
	assert.Equal(t, []any{"before_run", true, "allow"}, []any{ds[3]["stage"], ds[3]["resumed"], ds[3]["decision"]})
	aguitest.Verify(t, evs)
	for _, id := range callIDsOf(t, evs, "current_time") {
		assert.Equal(t, "denied by the guard: no clocks", resultOf(evs, id))
	}
	checkHistory(t, historyOf(t, p2.Kernel.Kernel, s.ID))
}

// TestContinue_GuardRefusesTheContinuedRun kills a process while its run
// waits for a person's approval; the next process's before_run guard now
// refuses the run: it ends failed with guard_denied, the approval it
// awaited resolved and the call answered, so its log and history stay
// valid; the call the guard denied before the kill keeps its denial.
func TestContinue_GuardRefusesTheContinuedRun(t *testing.T) {
	g := &fakeGuards{}
	opts := kerneltest.Options{
		Agents: []string{`
name: gated
model:
  provider: scripted
  script:
    - {text: "Saving.", tool_calls: [{name: memory_set, arguments: {key: note, value: "x"}}, {name: current_time}]}
    - {text: "Saved."}
tools: [{name: memory_set, require_approval: true}, current_time]
guard: {url: "https://policy.example.com/", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", before_run: true}
`},
		Guards: g,
	}
	g.set(map[string]guard.Decision{"current_time": {Action: guard.Deny, Reason: "no clocks"}}, guard.Decision{})
	db := memory.New()
	p1 := startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "gated")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "go")
	// The run waits for its approval before the guard's denial of the
	// other call is answered in the log: the kill comes after both.
	require.Eventually(t, func() bool {
		r, err := p1.GetRun(t.Context(), s.ID, run.ID)
		if err != nil || r.State != session.RunWaitingInput {
			return false
		}
		evs := logOf(t, p1.Kernel.Kernel, s.ID)
		ids := callIDsOf(t, evs, "current_time")
		return len(ids) == 1 && resultOf(evs, ids[0]) != ""
	}, waitTimeout, time.Millisecond)
	p1.kill(t)

	g.set(nil, guard.Decision{Action: guard.Deny, Reason: "this user is suspended"})
	p2 := startProcess(t, db, opts)
	got := awaitEnd(t, p2.Kernel.Kernel, s.ID, run.ID)
	require.Equal(t, session.RunFailed, got.State)
	require.NotNil(t, got.Error)
	assert.Equal(t, session.ErrorCodeGuardDenied, got.Error.Code)
	assert.Contains(t, got.Error.Message, "this user is suspended")
	checkLog(t, s.ID, logOf(t, p2.Kernel.Kernel, s.ID))
	calls, resumes := g.asked()
	assert.Empty(t, calls, "no call is made or asked about once the run is refused")
	require.Len(t, resumes, 1)
	assert.Equal(t, session.ResumeCrash, resumes[0].Reason)

	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	aguitest.Verify(t, evs)
	for _, id := range callIDsOf(t, evs, "memory_set") {
		assert.Contains(t, resultOf(evs, id), "the run ended", "the call awaiting approval is answered")
	}
	assert.Len(t, customEvents(evs, "kerneld.approval.resolved"), 1, "the approval it awaited is resolved")
	for _, id := range callIDsOf(t, evs, "current_time") {
		assert.Equal(t, "denied by the guard: no clocks", resultOf(evs, id))
	}
	checkHistory(t, historyOf(t, p2.Kernel.Kernel, s.ID))
}

// TestContinue_GuardAsksBesideAWaitingApproval kills a process while one
// call of a step waits for a person and another runs. The next process's
// guard now wants a person to look at the second call too: both wait, and
// each decision reaches the run, the earlier approval's as well.
func TestContinue_GuardAsksBesideAWaitingApproval(t *testing.T) {
	started := make(chan string, 8)
	lookup := &echoArgsTool{name: "lookup", started: started, release: make(chan struct{})}
	g := &fakeGuards{}
	opts := kerneltest.Options{
		Agents: []string{`
name: twofold
model:
  provider: scripted
  script:
    - {text: "Both.", tool_calls: [{name: memory_set, arguments: {key: note, value: "x"}}, {name: lookup, arguments: {q: "a"}}]}
    - {text: "Finished."}
tools: [{name: memory_set, require_approval: true}, lookup]
approval_timeout: 10m
guard: {url: "https://policy.example.com/", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
`},
		Tools:  []tools.Tool{lookup},
		Guards: g,
	}
	db := memory.New()
	p1 := startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "twofold")
	run := mustRun(t, p1.Kernel.Kernel, s.ID, "go")
	awaitStarted(t, started, 1)
	require.Eventually(t, func() bool {
		return len(customEvents(logOf(t, p1.Kernel.Kernel, s.ID), "kerneld.approval.requested")) == 1
	}, waitTimeout, time.Millisecond)
	p1.kill(t)

	g.set(map[string]guard.Decision{"lookup": {Action: guard.Ask, Reason: "look first"}}, guard.Decision{})
	lookup.Release()
	p2 := startProcess(t, db, opts)
	var asked []session.Event
	require.Eventually(t, func() bool {
		asked = customEvents(logOf(t, p2.Kernel.Kernel, s.ID), "kerneld.approval.requested")
		return len(asked) == 2
	}, waitTimeout, time.Millisecond, "the guard's ask is asked for")
	for _, ev := range asked {
		_, err := p2.Decide(t.Context(), s.ID, run.ID, customValue(t, ev)["toolCallId"].(string), true, "")
		require.NoError(t, err)
	}
	checkContinued(t, p2.Kernel.Kernel, s.ID, run.ID, "Finished.")
	evs := logOf(t, p2.Kernel.Kernel, s.ID)
	assert.JSONEq(t, `{"ok":true}`, resultOf(evs, customValue(t, asked[0])["toolCallId"].(string)), "memory_set ran once approved")
	assert.JSONEq(t, `{"q":"a"}`, resultOf(evs, customValue(t, asked[1])["toolCallId"].(string)), "lookup ran once approved")
}
