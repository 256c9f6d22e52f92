package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/client"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// talkingAnswer is what talkingAgent says, slowly enough for a kill to
// land in the middle.
const talkingAnswer = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen " +
	"sixteen seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five"

// The agents of the tests of runs that outlive their process.
const (
	talkingAgent = `
name: talking
model:
  provider: scripted
  token_delay: 25ms
  script:
    - {text: "` + talkingAnswer + `"}
`
	// countingAgent calls two tools of a counting MCP server (%s is its
	// URL): one that is not safe to call again, one that is.
	countingAgent = `
name: counting
model:
  provider: scripted
  script:
    - {text: "Calling both.", tool_calls: [{name: counter__once}, {name: counter__again}]}
    - {text: "All done."}
mcp_servers: [{name: counter, url: "%s", call_timeout: 2m}]
`
	// crashingAgent ends its process in every model call, once the
	// process's test faults are on.
	crashingAgent = `
name: crashing
max_resumes: 2
model: {provider: scripted, token_delay: 10ms, crash_after_tokens: 3, script: [{text: "this answer never gets to its end"}]}
`
	// interruptingAgent keeps the promise kerneld made before runs were
	// continued: a run its process dies under ends interrupted.
	interruptingAgent = pacedAgent + "on_crash: interrupt\n"
)

// startProcessAt starts kerneld on dataDir and agentsDir listening on addr
// ("127.0.0.1:0" for any port), with env added to its environment, and
// waits until it is ready.
func startProcessAt(t *testing.T, bin, addr, dataDir, agentsDir string, env ...string) *process {
	t.Helper()
	p := spawnProcess(t, bin, addr, dataDir, agentsDir, env...)
	p.base = "http://" + waitAddr(t, p.logs.String)
	waitReady(t, p.base)
	return p
}

// spawnProcess starts kerneld without waiting for it.
func spawnProcess(t *testing.T, bin, addr, dataDir, agentsDir string, env ...string) *process {
	t.Helper()
	p := &process{logs: &syncBuffer{}}
	p.cmd = exec.Command(bin, "-addr", addr, "-config", "../../configs/kerneld.yaml",
		"-data-dir", dataDir, "-agents-dir", agentsDir)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.logs
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("kerneld logs:\n%s", p.logs.String())
		}
	})
	return p
}

// kill9 kills p as kill -9 does and waits for it to be gone.
func (p *process) kill9(t *testing.T) time.Time {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-p.done()
	return killed
}

// runOf reads run runID of session id.
func runOf(t *testing.T, base, id, runID string) map[string]any {
	t.Helper()
	var run map[string]any
	getJSON(t, base+"/sessions/"+id+"/runs/"+runID, &run)
	return run
}

// decoded is an event of a session's log, decoded.
type decoded struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Value      json.RawMessage `json:"value"`
	MessageID  string          `json:"messageId"`
	Role       string          `json:"role"`
	Delta      string          `json:"delta"`
	ToolCallID string          `json:"toolCallId"`
	Content    string          `json:"content"`
	Code       string          `json:"code"`
	Timestamp  int64           `json:"timestamp"`
}

// decodeLog decodes a session's log.
func decodeLog(t *testing.T, log []json.RawMessage) []decoded {
	t.Helper()
	out := make([]decoded, len(log))
	for i, raw := range log {
		require.NoError(t, json.Unmarshal(raw, &out[i]))
	}
	return out
}

// resumedEvents returns the values of the log's kerneld.run.resumed events.
func resumedEvents(t *testing.T, log []decoded) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range log {
		if ev.Type == "CUSTOM" && ev.Name == "kerneld.run.resumed" {
			var v map[string]any
			require.NoError(t, json.Unmarshal(ev.Value, &v))
			out = append(out, v)
		}
	}
	return out
}

// answerOf returns the text of the last assistant message in the log.
func answerOf(log []decoded) string {
	var last string
	var b strings.Builder
	for _, ev := range log {
		switch {
		case ev.Type == "TEXT_MESSAGE_START" && ev.Role == "assistant":
			b.Reset()
		case ev.Type == "TEXT_MESSAGE_CONTENT":
			b.WriteString(ev.Delta)
		case ev.Type == "TEXT_MESSAGE_END":
			last = b.String()
		}
	}
	return last
}

// TestProcess_KillMidStream kills kerneld (SQLite, one process) with
// SIGKILL while a run streams its answer to a client, and starts it again
// on the same data and address. The Go client, reconnecting by itself,
// sees every event once and the run end RUN_FINISHED, and so does
// `kerneld watch`, which prints the whole answer after a note; the run is
// continued (resumes 1) and its answer is the whole answer; the log keeps,
// byte for byte, every event the client saw before the kill, and passes
// the AG-UI checker with one RUN_STARTED and one RUN_FINISHED for the run.
func TestProcess_KillMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin, dataDir, agentsDir := buildBinary(t), t.TempDir(), t.TempDir()
	writeFile(t, agentsDir, "talking.yaml", talkingAgent)
	p1 := startProcessAt(t, bin, "127.0.0.1:0", dataDir, agentsDir)
	c, err := client.New(p1.base)
	require.NoError(t, err)
	s, err := c.CreateSession(t.Context(), client.CreateSessionRequest{Agent: "talking"})
	require.NoError(t, err)
	follow, err := c.Follow(t.Context(), s.ID, client.FollowOptions{})
	require.NoError(t, err)
	defer follow.Close()
	watch := &syncBuffer{}
	watcher := exec.Command(bin, "watch", s.ID)
	watcher.Env, watcher.Stdout, watcher.Stderr = append(os.Environ(), "KERNELD_URL="+p1.base), watch, watch
	require.NoError(t, watcher.Start())
	t.Cleanup(func() { _ = watcher.Process.Kill(); _ = watcher.Wait() })
	// watch gives up if its first connection is refused, so the kill must
	// come after it has its stream: the client's and watch's are both open.
	pollUntil(t, "kerneld watch to open its stream", func() bool {
		return metric(t, p1.base, "kerneld_streams_open") >= 2
	})
	run, err := c.CreateRun(t.Context(), s.ID, client.CreateRunRequest{Input: "count"})
	require.NoError(t, err)

	var seen []client.Event
	for len(seen) < 8 {
		ev, err := follow.Next()
		require.NoError(t, err)
		seen = append(seen, ev)
	}
	before := eventLog(t, p1.base, s.ID)
	killed := p1.kill9(t)
	p2 := startProcessAt(t, bin, p1.addr(), dataDir, agentsDir)
	t.Logf("kerneld was ready %v after the kill", time.Since(killed).Round(time.Millisecond))
	for seen[len(seen)-1].Type != client.RunFinished && seen[len(seen)-1].Type != client.RunErrorType {
		ev, err := follow.Next()
		require.NoError(t, err, "the client follows the run across the restart")
		seen = append(seen, ev)
	}
	assert.Positive(t, follow.Reconnects(), "the client reconnected")
	for i, ev := range seen {
		require.Equal(t, int64(i+1), ev.Seq, "event %d of the client's stream: a gap or a duplicate", i)
	}
	assert.Equal(t, client.RunFinished, seen[len(seen)-1].Type)

	got := runOf(t, p2.base, s.ID, run.ID)
	assert.Equal(t, "succeeded", got["state"])
	assert.Equal(t, float64(1), got["resumes"])
	raw := eventLog(t, p2.base, s.ID)
	for i := range before {
		require.JSONEq(t, string(before[i]), string(raw[i]), "event %d logged before the kill changed", i+1)
	}
	aguitest.VerifyJSON(t, asBytes(raw))
	log := decodeLog(t, raw)
	resumed := resumedEvents(t, log)
	require.Len(t, resumed, 1)
	assert.Equal(t, "crash", resumed[0]["reason"])
	assert.Equal(t, talkingAnswer, answerOf(log))
	for _, ev := range log {
		if ev.Type == "CUSTOM" && ev.Name == "kerneld.run.resumed" {
			t.Logf("first event of the continued run %v after the kill", time.UnixMilli(ev.Timestamp).Sub(killed).Round(time.Millisecond))
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kerneld watch printed:\n%s", watch.String())
		}
	})
	pollUntil(t, "kerneld watch to print the whole answer after the restart", func() bool {
		return strings.Contains(watch.String(), "↻ the run goes on after kerneld stopped (crash)") &&
			strings.HasSuffix(watch.String(), talkingAnswer+"\n")
	})
	next := post(t, p2.base+"/sessions/"+s.ID+"/run", `{"input":"and now?"}`)
	assert.Equal(t, float64(len(raw)+1), next["start_seq"], "the seq goes on")
}

// TestProcess_KillMidToolCall kills kerneld while a run waits on two MCP
// tool calls whose server (in this test's process) counts them: one tool
// says nothing of itself, the other that calling it again has no further
// effect (idempotentHint). After the restart the second is called again,
// the first is not: it gets an error result saying it may or may not have
// taken effect, and the model is asked again with both results.
func TestProcess_KillMidToolCall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	counter := mcptest.ServeCounter(t)
	bin, dataDir, agentsDir := buildBinary(t), t.TempDir(), t.TempDir()
	writeFile(t, agentsDir, "counting.yaml", fmt.Sprintf(countingAgent, counter.URL))
	p1 := startProcessAt(t, bin, "127.0.0.1:0", dataDir, agentsDir)
	id := post(t, p1.base+"/sessions", `{"agent":"counting"}`)["id"].(string)
	runID := post(t, p1.base+"/sessions/"+id+"/run", `{"input":"count"}`)["id"].(string)
	for range 2 {
		select {
		case <-counter.Started():
		case <-time.After(15 * time.Second):
			t.Fatal("the tool calls did not start")
		}
	}
	p1.kill9(t)
	counter.Release() // the calls made again answer at once

	p2 := startProcessAt(t, bin, "127.0.0.1:0", dataDir, agentsDir)
	waitRunState(t, p2.base, id, runID, "succeeded")
	assert.Equal(t, 1, counter.Calls("once"), "the tool that is not safe to call again was not")
	assert.Equal(t, 2, counter.Calls("again"), "the idempotent tool was called again")
	raw := eventLog(t, p2.base, id)
	aguitest.VerifyJSON(t, asBytes(raw))
	results := map[string]string{}
	calls := map[string]string{}
	for _, f := range rawFrames(t, raw) {
		switch f["type"] {
		case "TOOL_CALL_START":
			calls[f["toolCallId"].(string)] = f["toolCallName"].(string)
		case "TOOL_CALL_RESULT":
			results[calls[f["toolCallId"].(string)]] = f["content"].(string)
		}
	}
	assert.Contains(t, results["counter__once"], "may or may not have taken effect")
	assert.Equal(t, "again call 2", results["counter__again"])
	assert.Equal(t, "All done.", answerOf(decodeLog(t, raw)))
	checkHistoryAnswered(t, p2.base, id)
	assert.Equal(t, float64(1), runOf(t, p2.base, id, runID)["resumes"])
}

// rawFrames decodes a log's events as maps.
func rawFrames(t *testing.T, raw []json.RawMessage) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(raw))
	for i, r := range raw {
		require.NoError(t, json.Unmarshal(r, &out[i]))
	}
	return out
}

// TestProcess_CrashLoop runs an agent whose model call ends the process
// every time (a test fault, on only with KERNELD_TEST_FAULTS=crash): the
// run is continued after each crash, max_resumes (2) times, and the next
// process ends it interrupted with code resume_limit rather than crash
// again.
func TestProcess_CrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin, dataDir, agentsDir := buildBinary(t), t.TempDir(), t.TempDir()
	writeFile(t, agentsDir, "crashing.yaml", crashingAgent)
	faults := testFaultsEnv + "=crash"
	p := startProcessAt(t, bin, "127.0.0.1:0", dataDir, agentsDir, faults)
	id := post(t, p.base+"/sessions", `{"agent":"crashing"}`)["id"].(string)
	runID := post(t, p.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
	crashes := 0
	for {
		require.NoError(t, waitExit(p), "crash %d", crashes+1)
		crashes++
		require.LessOrEqual(t, crashes, 3, "the run crashed its process more often than max_resumes allows")
		p = spawnProcess(t, bin, "127.0.0.1:0", dataDir, agentsDir, faults)
		if ended := waitRunEndOrExit(t, p, id, runID); ended {
			break
		}
	}
	assert.Equal(t, 3, crashes, "the first process and the two it was continued in")
	run := runOf(t, p.base, id, runID)
	assert.Equal(t, "interrupted", run["state"])
	assert.Equal(t, "resume_limit", run["error"].(map[string]any)["code"])
	assert.Equal(t, float64(2), run["resumes"])
	raw := eventLog(t, p.base, id)
	aguitest.VerifyJSON(t, asBytes(raw))
	log := decodeLog(t, raw)
	assert.Len(t, resumedEvents(t, log), 2)
	assert.Equal(t, "resume_limit", log[len(log)-1].Code)
}

// waitExit waits for p to exit by itself.
func waitExit(p *process) error {
	select {
	case <-p.done():
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("kerneld did not exit; logs:\n%s", p.logs.String())
	}
}

// waitRunEndOrExit waits until run runID of session id has ended (true),
// or p has exited (false).
func waitRunEndOrExit(t *testing.T, p *process, id, runID string) bool {
	t.Helper()
	exited := p.done()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return false
		default:
		}
		m := listening.FindStringSubmatch(p.logs.String())
		if m == nil {
			continue
		}
		p.base = "http://" + m[1]
		res, err := httpGet(p.base + "/sessions/" + id + "/runs/" + runID)
		if err == nil && strings.Contains(res, `"ended_at":"`) {
			return true
		}
	}
	t.Fatalf("the run neither ended nor crashed its process; logs:\n%s", p.logs.String())
	return false
}

// httpGet returns the body of a GET.
func httpGet(url string) (string, error) {
	res, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// httpClient gives up quickly on a process that may be dying.
var httpClient = &http.Client{Timeout: 2 * time.Second}

// TestProcess_KillInterrupting kills kerneld in the middle of a run with
// a tool call of an agent that says on_crash: interrupt, and starts it
// again: the run ends interrupted as kerneld ended such runs before it
// continued them. Every event the client saw is still in the log with the
// same seq and content; the tool call the client saw start is in the
// history, answered by an error result the log shows too; no tool call is
// left unanswered; and the session runs again with its seq continuing.
func TestProcess_KillInterrupting(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin, dataDir, agentsDir := buildBinary(t), t.TempDir(), t.TempDir()
	writeFile(t, agentsDir, "paced.yaml", interruptingAgent)

	p1 := startProcess(t, bin, dataDir, agentsDir)
	id := post(t, p1.base+"/sessions", `{"agent":"paced"}`)["id"].(string)
	runID := post(t, p1.base+"/sessions/"+id+"/run", `{"input":"what time is it?"}`)["id"].(string)
	body := stream(t, p1.base, id, 0)
	seen := body.until(t, func(f sseFrame) bool { return f.event == "TOOL_CALL_ARGS" })
	p1.kill9(t)
	body.Close()

	p2 := startProcess(t, bin, dataDir, agentsDir)
	waitRunState(t, p2.base, id, runID, "interrupted")
	log := eventLog(t, p2.base, id)
	checkSameFrames(t, p2.base, id, seen)
	checkInterrupted(t, p2.base, id, runID, log)
	callID := startedToolCall(t, seen)
	checkToolCallAnswered(t, p2.base, id, callID, log)
	checkHistoryAnswered(t, p2.base, id)

	next := post(t, p2.base+"/sessions/"+id+"/run", `{"input":"and now?"}`)
	if next["start_seq"].(float64) != float64(len(log)+1) {
		t.Fatalf("next run starts at seq %v, want %d", next["start_seq"], len(log)+1)
	}
	waitRunState(t, p2.base, id, next["id"].(string), "succeeded")
	aguitest.VerifyJSON(t, asBytes(eventLog(t, p2.base, id)))
}

// TestProcess_SIGTERMContinues stops kerneld (SQLite, one process) with
// SIGTERM while a run streams the model call before its tool call: the run
// reaches its step boundary after the tool call, is handed off there and
// kerneld exits, well within the shutdown timeout. Started again, kerneld
// continues the run from that step (reason shutdown, nothing cut) to its
// whole answer.
func TestProcess_SIGTERMContinues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin, dataDir, agentsDir := buildBinary(t), t.TempDir(), t.TempDir()
	writeFile(t, agentsDir, "paced.yaml", pacedAgent)
	p1 := startProcessAt(t, bin, "127.0.0.1:0", dataDir, agentsDir)
	id := post(t, p1.base+"/sessions", `{"agent":"paced"}`)["id"].(string)
	runID := post(t, p1.base+"/sessions/"+id+"/run", `{"input":"what time is it?"}`)["id"].(string)
	body := stream(t, p1.base, id, 0)
	body.until(t, assistantText()) // the model is mid-step
	body.Close()
	require.NoError(t, p1.cmd.Process.Signal(syscall.SIGTERM))
	termed := time.Now()
	require.NoError(t, waitExit(p1))
	t.Logf("kerneld exited %v after SIGTERM", time.Since(termed).Round(time.Millisecond))
	assert.Contains(t, p1.logs.String(), "run leaves at a step boundary")
	assert.Less(t, time.Since(termed), 10*time.Second, "within the shutdown timeout")

	p2 := startProcessAt(t, bin, "127.0.0.1:0", dataDir, agentsDir)
	waitRunState(t, p2.base, id, runID, "succeeded")
	raw := eventLog(t, p2.base, id)
	aguitest.VerifyJSON(t, asBytes(raw))
	log := decodeLog(t, raw)
	resumed := resumedEvents(t, log)
	require.Len(t, resumed, 1)
	assert.Equal(t, "shutdown", resumed[0]["reason"])
	assert.Equal(t, float64(1), resumed[0]["step"])
	assert.Empty(t, resumed[0]["cutMessageIds"])
	assert.Equal(t, "It is later than you think, and that is fine.", answerOf(log))
	run := runOf(t, p2.base, id, runID)
	assert.Equal(t, float64(1), run["resumes"])
}
