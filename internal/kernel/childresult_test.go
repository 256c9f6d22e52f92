package kernel_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// Agents for the background child tests: bgchild blocks in the test tool
// "wait" until released, then answers; bgidle starts it in the
// background and ends its run; bgbusy starts echo in the background and
// blocks itself, so the answer arrives while it is busy (bgsteer
// likewise, with child_results: steer).
const (
	bgChild = `
name: bgchild
model: {provider: scripted, script: [{text: "Working.", tool_calls: [{name: wait}]}, {text: "Child done."}]}
tools: [wait]
`
	bgIdle = `
name: bgidle
model:
  provider: scripted
  script:
    - {text: "Starting.", tool_calls: [{name: spawn_agent, arguments: {agent: bgchild, input: work, wait: false}}]}
    - {text: "Started."}
  replies: [{starts_with: "[child_result]", text: "Got the result."}]
tools: [spawn_agent, wait]
child_agents: [bgchild]
`
	bgBusy = `
model:
  provider: scripted
  script:
    - {text: "Starting.", tool_calls: [{name: spawn_agent, arguments: {agent: echo, input: "hi there", wait: false}}, {name: wait}]}
    - {text: "Started."}
  replies: [{starts_with: "[child_result]", text: "Got the result."}]
tools: [spawn_agent, wait, current_time, memory_get, memory_set]
child_agents: [echo]
`
)

func TestKernel_BackgroundChild(t *testing.T) {
	t.Run("answer arrives while the parent is idle", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{bgChild, bgIdle}})
		s := mustSession(t, k.Kernel, "bgidle")
		first := runToEnd(t, k.Kernel, rec, s.ID, "go")
		require.Equal(t, session.RunSucceeded, first.State, "the parent's run goes on without waiting")
		evs := logOf(t, k.Kernel, s.ID)
		started := customEvents(evs, "kerneld.child.started")
		require.Len(t, started, 1)
		childID, _ := customValue(t, started[0])["childSessionId"].(string)
		contents, errs := spawnResults(evs)
		require.Equal(t, []bool{false}, errs)
		assert.Contains(t, contents[0], `"state":"running"`)
		assert.Contains(t, contents[0], childID)
		child := mustGet(t, k.Kernel, childID)
		assert.Equal(t, s.ID, child.ParentID)
		assert.NotEqual(t, session.StateClosed, child.State, "the child is still at work")

		k.Wait.Release()
		second := waitChildResult(t, k.Kernel, rec, s.ID)
		assert.Equal(t, session.RunSucceeded, second.State)
		assert.Empty(t, second.IfBusy, "an idle parent runs it at once")
		assert.Contains(t, second.Input, "Child done.")
		require.NotNil(t, second.ChildResult)
		assert.Equal(t, session.ChildResult{SessionID: child.ID, RunID: second.ChildResult.RunID, Agent: "bgchild",
			State: session.RunSucceeded, Answer: "Child done."}, *second.ChildResult)
		evs = verifiedLog(t, k.Kernel, s.ID)
		marks := customEvents(runEvents(evs, second.ID), "kerneld.child.result")
		require.Len(t, marks, 1)
		assert.Equal(t, "succeeded", customValue(t, marks[0])["state"])
		started = runEvents(evs, second.ID)[:1]
		require.Equal(t, session.EventRunStarted, started[0].Type)
		assert.Equal(t, "child_result", kerneldMeta(t, started[0])["source"], "RUN_STARTED says kerneld posted the input")
		assert.Nil(t, kerneldMeta(t, runEvents(evs, first.ID)[0])["source"], "a client's run says nothing")
		waitClosed(t, k.Kernel, childID)
	})

	for _, policy := range []string{"queue", "steer"} {
		t.Run("answer arrives while the parent is busy, "+policy, func(t *testing.T) {
			parent := "name: bgbusy\nchild_results: " + policy + bgBusy
			k, rec := newKernel(t, kerneltest.Options{Agents: []string{kerneltest.Echo, parent}})
			s := mustSession(t, k.Kernel, "bgbusy")
			first := mustRun(t, k.Kernel, s.ID, "go")
			<-k.Wait.Started()
			posted := waitRunCount(t, k.Kernel, s.ID, 2)[0]
			assert.Equal(t, session.RunQueued, posted.State, "the answer waits for the busy parent")
			assert.Equal(t, policy, posted.IfBusy)
			k.Wait.Release()
			waitRun(t, k.Kernel, rec, s.ID, first.ID)
			evs := logOf(t, k.Kernel, s.ID)
			if policy == "steer" {
				got := waitRun(t, k.Kernel, rec, s.ID, first.ID)
				posted, err := k.GetRun(t.Context(), s.ID, posted.ID)
				require.NoError(t, err)
				assert.Equal(t, session.RunSteered, posted.State)
				assert.Equal(t, session.RunSucceeded, got.State)
				require.Len(t, customEvents(runEvents(evs, first.ID), "kerneld.child.result"), 1, "folded into the active run")
				verifiedLog(t, k.Kernel, s.ID)
				return
			}
			second := waitRun(t, k.Kernel, rec, s.ID, posted.ID)
			assert.Equal(t, session.RunSucceeded, second.State)
			assert.Equal(t, session.RunSourceChildResult, second.Source)
			assert.True(t, strings.HasSuffix(second.Input, "Its answer:\nhi there"), second.Input)
			evs = verifiedLog(t, k.Kernel, s.ID)
			require.Len(t, customEvents(runEvents(evs, second.ID), "kerneld.child.result"), 1)
		})
	}
}

// waitChildResult waits for the child_result run of session id to end.
func waitChildResult(t *testing.T, k *kernel.Kernel, rec *recorder, id string) session.Run {
	t.Helper()
	runs := waitRunCount(t, k, id, 2)
	require.Equal(t, session.RunSourceChildResult, runs[0].Source)
	return waitRun(t, k, rec, id, runs[0].ID)
}

// waitRunCount waits until session id has n runs and returns them, newest
// first.
func waitRunCount(t *testing.T, k *kernel.Kernel, id string, n int) []session.Run {
	t.Helper()
	var runs []session.Run
	require.Eventually(t, func() bool {
		runs = allRuns(t, k, id)
		return len(runs) >= n
	}, waitTimeout, time.Millisecond, "session %s never had %d runs", id, n)
	return runs
}

// waitClosed waits until session id is closed.
func waitClosed(t *testing.T, k *kernel.Kernel, id string) {
	t.Helper()
	require.Eventually(t, func() bool { return mustGet(t, k, id).State == session.StateClosed },
		waitTimeout, time.Millisecond, "session %s never closed", id)
}

// TestContinue_BackgroundChild kills a process while a background child
// and its parent both work: the next process continues both (or ends the
// child interrupted, when its agent says on_crash: interrupt), the
// parent's run starts no second child, and the child's end still reaches
// the parent.
func TestContinue_BackgroundChild(t *testing.T) {
	for _, tt := range []struct {
		name, child, want string
	}{
		{"continued", bgChild, "Child done."},
		{"interrupted", bgChild + "on_crash: interrupt\n", "did not finish"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := kerneltest.Options{Agents: []string{tt.child, bgCrash}}
			db := memory.New()
			p1 := startProcess(t, db, opts)
			s := mustSession(t, p1.Kernel.Kernel, "bgcrash")
			mustRun(t, p1.Kernel.Kernel, s.ID, "go")
			<-p1.Wait.Started() // the parent's wait, and the child's, in either order
			<-p1.Wait.Started()
			p1.kill(t)

			p2 := startProcess(t, db, opts)
			second := waitChildResult(t, p2.Kernel.Kernel, p2.rec, s.ID)
			assert.Equal(t, session.RunSucceeded, second.State)
			assert.Contains(t, second.Input, tt.want)
			children, err := p2.Children(t.Context(), s.ID, kernel.PageRequest{})
			require.NoError(t, err)
			assert.Len(t, children.Items, 1, "the continued run started no second child")
			verifiedLog(t, p2.Kernel.Kernel, s.ID)
		})
	}
}

// bgCrash starts bgchild in the background and blocks in wait itself.
const bgCrash = `
name: bgcrash
model:
  provider: scripted
  script:
    - {text: "Starting.", tool_calls: [{name: spawn_agent, arguments: {agent: bgchild, input: work, wait: false}}, {name: wait}]}
    - {text: "Started."}
  replies: [{starts_with: "[child_result]", text: "Got the result."}]
tools: [spawn_agent, wait]
child_agents: [bgchild]
`

// TestContinue_ChildResultLeftUndelivered: the process dies after a
// background child's run has ended and before its answer reached the
// parent. The next process, on the same SQLite file, posts the answer
// once, and closes the child.
func TestContinue_ChildResultLeftUndelivered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kerneld.db")
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	opts := kerneltest.Options{Agents: []string{bgChild, bgIdle}}
	var p1 process
	childEnded := make(chan struct{})
	kernel.OnRunEnded(t, func(ended session.Run) {
		if ended.Background && p1.store != nil && !p1.store.dead.Swap(true) { // the process dies here
			close(childEnded)
		}
	})
	p1 = startProcess(t, db, opts)
	s := mustSession(t, p1.Kernel.Kernel, "bgidle")
	first := runToEnd(t, p1.Kernel.Kernel, p1.rec, s.ID, "go")
	require.Equal(t, session.RunSucceeded, first.State)
	p1.Wait.Release()
	<-childEnded
	p1.kill(t)
	require.Len(t, allRuns(t, p1.Kernel.Kernel, s.ID), 1, "the dead process posted nothing")
	require.NoError(t, db.Close())

	db, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	p2 := startProcess(t, db, opts)
	result := waitChildResult(t, p2.Kernel.Kernel, p2.rec, s.ID)
	assert.Equal(t, session.RunSucceeded, result.State)
	assert.Contains(t, result.Input, "Child done.")
	require.NotNil(t, result.ChildResult)
	waitClosed(t, p2.Kernel.Kernel, result.ChildResult.SessionID)
	_, err = p2.Recover(t.Context())
	require.NoError(t, err)
	assert.Len(t, allRuns(t, p2.Kernel.Kernel, s.ID), 2, "the answer is posted once")
	verifiedLog(t, p2.Kernel.Kernel, s.ID)
}
