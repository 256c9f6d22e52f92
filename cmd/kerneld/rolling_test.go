package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session/aguitest"
)

// steppingAgent takes fifteen steps, each a short streamed text and a
// tool call, then answers: runs of about eight seconds with a step
// boundary every half second, for a deploy to hand them off at.
var steppingAgent = func() string {
	var b strings.Builder
	b.WriteString("name: stepping\nmax_turns: 32\nmodel:\n  provider: scripted\n  token_delay: 60ms\n  script:\n")
	for i := range 15 {
		fmt.Fprintf(&b, "    - {text: \"step %d of the work goes on\", tool_calls: [{name: current_time}]}\n", i+1)
	}
	b.WriteString("    - {text: \"" + steppingAnswer + "\"}\ntools: [current_time]\n")
	return b.String()
}()

const steppingAnswer = "All fifteen steps are done."

// TestCluster_RollingRestart restarts each of three replicas in turn with
// SIGTERM, as a rolling deploy does, while 30 runs stream. Each replica
// hands its runs off at their next step boundary and the others continue
// them at once: all 30 runs must succeed with their whole answer, none
// interrupted, each with one RUN_STARTED and one RUN_FINISHED in a
// gapless log that passes the AG-UI checker. The test logs how long the
// runs handed off took to go on elsewhere.
func TestCluster_RollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	eachSharedStore(t, testRollingRestart)
}

func testRollingRestart(t *testing.T, store sharedStore) {
	cl := newCluster(t, store)
	writeFile(t, cl.agentsDir, "stepping.yaml", steppingAgent)
	replicas := map[string]*process{"a": cl.start("a"), "b": cl.start("b"), "c": cl.start("c")}
	type started struct{ id, runID, base string }
	runs := make([]started, 30)
	var wg sync.WaitGroup
	for i := range runs {
		base := replicas[string(rune('a'+i%3))].base
		wg.Go(func() {
			id := post(t, base+"/sessions", `{"agent":"stepping"}`)["id"].(string)
			runs[i] = started{id, post(t, base+"/sessions/"+id+"/run", `{"input":"work"}`)["id"].(string), base}
		})
	}
	wg.Wait()

	var terms []time.Time
	var stopped strings.Builder // the logs of the replicas stopped
	for _, name := range []string{"a", "b", "c"} {
		p := replicas[name]
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		terms = append(terms, time.Now())
		require.NoError(t, waitExit(p))
		require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "replica %s exits cleanly:\n%s", name, p.logs.String())
		assert.Contains(t, p.logs.String(), "run handed off for another process to continue",
			"replica %s had no run to hand off: the deploy missed the runs", name)
		stopped.WriteString(p.logs.String())
		replicas[name] = cl.start(name)
	}

	var logs [][][]byte
	var toBoundary, toElsewhere []time.Duration // SIGTERM to the hand-off; the hand-off to the run going on
	for _, r := range runs {
		base := replicas["a"].base
		waitRunState(t, base, r.id, r.runID, "succeeded")
		raw := eventLog(t, base, r.id)
		logs = append(logs, asBytes(raw))
		log := decodeLog(t, raw)
		assert.Equal(t, steppingAnswer, answerOf(log), "session %s", r.id)
		handoffs := handoffTimes(t, stopped.String(), r.runID)
		for _, ev := range log {
			if ev.Type != "CUSTOM" || ev.Name != "kerneld.run.resumed" {
				continue
			}
			at := time.UnixMilli(ev.Timestamp + 1) // the millisecond it was in, rounded up: not before a hand-off logged in it
			left := lastBefore(handoffs, at)
			toBoundary = append(toBoundary, left.Sub(lastBefore(terms, left)))
			toElsewhere = append(toElsewhere, at.Sub(left))
		}
	}
	aguitest.VerifyJSONLogs(t, logs)
	require.NotEmpty(t, toElsewhere, "no run was handed off: the restarts missed them all")
	t.Logf("%d hand-offs; SIGTERM to the run's step boundary: %s; hand-off to the run going on elsewhere: %s",
		len(toElsewhere), spread(toBoundary), spread(toElsewhere))
}

// handoffTimes returns when kerneld logged handing run runID off, in
// order.
func handoffTimes(t *testing.T, logs, runID string) []time.Time {
	t.Helper()
	var out []time.Time
	for line := range strings.SplitSeq(logs, "\n") {
		if at, ok := loggedAt(t, line, "run handed off for another process to continue", "run="+runID); ok {
			out = append(out, at)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// spread says the median and the largest of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	return fmt.Sprintf("median %v, max %v", ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// lastBefore returns the last of times, in order, that is not after at.
func lastBefore(times []time.Time, at time.Time) time.Time {
	var last time.Time
	for _, tm := range times {
		if !tm.After(at) {
			last = tm
		}
	}
	return last
}
