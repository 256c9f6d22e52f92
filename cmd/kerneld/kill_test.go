package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/store/sqlite/sqlitetest"
)

// pacedAgent streams slowly and calls a tool, so a kill lands mid-run.
const pacedAgent = `
name: paced
model:
  provider: scripted
  token_delay: 25ms
  script:
    - {text: "Let me look at the clock for you.", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "It is later than you think, and that is fine."}
tools: [current_time]
`

// process is a kerneld child process.
type process struct {
	cmd  *exec.Cmd
	base string
	logs *syncBuffer

	waitOnce sync.Once
	exited   chan struct{} // closed once the process has exited and been waited for
}

// done returns a channel closed once p has exited. It waits for p on a
// goroutine of its own, once: a process may be waited for only once, and
// several parts of a test want to know when it is gone.
func (p *process) done() <-chan struct{} {
	p.waitOnce.Do(func() {
		p.exited = make(chan struct{})
		go func() {
			_ = p.cmd.Wait() // its exit code stays in cmd.ProcessState
			close(p.exited)
		}()
	})
	return p.exited
}

// stop kills p, if it still runs, and waits until it is gone.
func (p *process) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done()
}

func startProcess(t *testing.T, bin, dataDir, agentsDir string) *process {
	t.Helper()
	p := &process{logs: &syncBuffer{}}
	p.cmd = exec.Command(bin, "-addr", "127.0.0.1:0", "-config", "../../configs/kerneld.yaml",
		"-data-dir", dataDir, "-agents-dir", agentsDir)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	p.base = "http://" + waitAddr(t, p.logs.String)
	waitReady(t, p.base)
	return p
}

// waitReady polls /readyz until kerneld has opened and recovered its store.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if res, err := http.Get(base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("kerneld did not become ready")
}

// sseFrame is one event frame as a client received it.
type sseFrame struct {
	id    int64
	event string
	data  string
}

// assistantText returns a stop function for readUntil that stops at the
// first content of an assistant message. A run's log starts with the
// user's input as a message of its own, whose content frames come before
// the model says anything.
func assistantText() func(sseFrame) bool {
	assistant := map[string]bool{}
	return func(f sseFrame) bool {
		var ev struct {
			MessageID string `json:"messageId"`
			Role      string `json:"role"`
		}
		_ = json.Unmarshal([]byte(f.data), &ev)
		switch f.event {
		case "TEXT_MESSAGE_START":
			assistant[ev.MessageID] = ev.Role == "assistant"
		case "TEXT_MESSAGE_CONTENT":
			return assistant[ev.MessageID]
		}
		return false
	}
}

// readUntil reads frames from an SSE body until stop returns true.
func readUntil(t *testing.T, body io.Reader, stop func(sseFrame) bool) []sseFrame {
	t.Helper()
	r := bufio.NewReader(body)
	var frames []sseFrame
	var f sseFrame
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read stream: %v (after %d frames)", err, len(frames))
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			f.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = line[6:]
		case line == "" && f.id > 0:
			frames = append(frames, f)
			if stop(f) {
				return frames
			}
			f = sseFrame{}
		}
	}
}

// eventLog reads a session's whole log as JSON pages.
func eventLog(t *testing.T, base, id string) []json.RawMessage {
	t.Helper()
	var all []json.RawMessage
	for after := int64(0); ; {
		req, _ := http.NewRequest("GET", base+"/sessions/"+id+"/events?limit=1000&after="+strconv.FormatInt(after, 10), nil)
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Data      []json.RawMessage `json:"data"`
			NextAfter int64             `json:"next_after"`
		}
		err = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Data...)
		if len(page.Data) < 1000 {
			return all
		}
		after = page.NextAfter
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %v", url, res.StatusCode, err)
	}
}

// checkSameFrames checks that the session's stream, read again from the
// start, carries the frames seen, byte for byte, under the same ids.
func checkSameFrames(t *testing.T, base, id string, seen []sseFrame) {
	t.Helper()
	res, err := http.Get(base + "/sessions/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	last := seen[len(seen)-1].id
	again := readUntil(t, res.Body, func(f sseFrame) bool { return f.id >= last })
	for i, f := range seen {
		if i >= len(again) || again[i] != f {
			t.Fatalf("event %d the client saw before the kill is not in the log as it was:\nsaw    %+v\nlogged %+v", f.id, f, again[min(i, len(again)-1)])
		}
	}
}

// checkInterrupted checks that the killed run ended as interrupted.
func checkInterrupted(t *testing.T, base, id, runID string, log []json.RawMessage) {
	t.Helper()
	var last struct {
		Type string `json:"type"`
		Code string `json:"code"`
	}
	if err := json.Unmarshal(log[len(log)-1], &last); err != nil || last.Type != "RUN_ERROR" || last.Code != "interrupted" {
		t.Fatalf("last event = %s, want RUN_ERROR interrupted", log[len(log)-1])
	}
	var run map[string]any
	getJSON(t, base+"/sessions/"+id+"/runs/"+runID, &run)
	if run["state"] != "interrupted" || run["end_seq"] != float64(len(log)) {
		t.Fatalf("run = %v, want interrupted ending at %d", run, len(log))
	}
	var s map[string]any
	getJSON(t, base+"/sessions/"+id, &s)
	if s["state"] != "error" || s["active_run_id"] != nil {
		t.Fatalf("session = %v, want error and free", s)
	}
}

// historyMessage is a message of GET /sessions/{id}/messages.
type historyMessage struct {
	Role       string  `json:"role"`
	ToolCallID *string `json:"tool_call_id"`
	IsError    bool    `json:"is_error"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

// history returns a session's messages.
func history(t *testing.T, base, id string) []historyMessage {
	t.Helper()
	var page struct {
		Data []historyMessage `json:"data"`
	}
	getJSON(t, base+"/sessions/"+id+"/messages?limit=200", &page)
	return page.Data
}

// startedToolCall returns the id of the tool call whose TOOL_CALL_START
// the client saw.
func startedToolCall(t *testing.T, seen []sseFrame) string {
	t.Helper()
	for _, f := range seen {
		if f.event != "TOOL_CALL_START" {
			continue
		}
		var ev struct {
			ToolCallID string `json:"toolCallId"`
		}
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil || ev.ToolCallID == "" {
			t.Fatalf("TOOL_CALL_START without a toolCallId: %s", f.data)
		}
		return ev.ToolCallID
	}
	t.Fatal("the client saw no TOOL_CALL_START before the kill")
	return ""
}

// checkToolCallAnswered checks that recovery answered the tool call the
// kill left dangling: the history holds the assistant message that made
// it and an error result for it, and the log the matching
// TOOL_CALL_RESULT.
func checkToolCallAnswered(t *testing.T, base, id, callID string, log []json.RawMessage) {
	t.Helper()
	var made, answered bool
	for _, m := range history(t, base, id) {
		for _, c := range m.ToolCalls {
			if m.Role == "assistant" && c.ID == callID {
				made = true
			}
		}
		if m.ToolCallID != nil && *m.ToolCallID == callID {
			if m.Role != "tool" || !m.IsError || answered {
				t.Errorf("result of tool call %s: role %s, is_error %v, another before: %v; want one tool message with is_error",
					callID, m.Role, m.IsError, answered)
			}
			answered = true
		}
	}
	if !made {
		t.Errorf("no assistant message in the history carries tool call %s", callID)
	}
	if !answered {
		t.Errorf("no tool message in the history answers tool call %s", callID)
	}
	if !loggedErrorResult(t, log, callID) {
		t.Errorf("the log has no TOOL_CALL_RESULT with isError for tool call %s", callID)
	}
}

// loggedErrorResult reports whether log has a TOOL_CALL_RESULT for callID
// marked as an error.
func loggedErrorResult(t *testing.T, log []json.RawMessage, callID string) bool {
	t.Helper()
	for _, raw := range log {
		var ev struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			Metadata   struct {
				Kerneld struct {
					IsError bool `json:"isError"`
				} `json:"kerneld"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		if ev.Type == "TOOL_CALL_RESULT" && ev.ToolCallID == callID {
			return ev.Metadata.Kerneld.IsError
		}
	}
	return false
}

// checkHistoryAnswered checks every tool call in the history has a result.
func checkHistoryAnswered(t *testing.T, base, id string) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range history(t, base, id) {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.ToolCallID != nil {
			delete(open, *m.ToolCallID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("tool calls without a result in the history: %v", open)
	}
}

func waitRunState(t *testing.T, base, id, runID, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var run map[string]any
		getJSON(t, base+"/sessions/"+id+"/runs/"+runID, &run)
		if run["ended_at"] != nil {
			if run["state"] != want {
				t.Fatalf("run = %v, want %s", run, want)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", runID)
}

func asBytes(raw []json.RawMessage) [][]byte {
	out := make([][]byte, len(raw))
	for i, r := range raw {
		out[i] = r
	}
	return out
}

// quickAgent answers at once, to fill a database fast.
const quickAgent = `
name: quick
model:
  provider: scripted
  script:
    - {text: "done"}
`

// TestRun_CorruptedDatabase starts kerneld on a database it wrote itself
// in which one interior b-tree page has been zeroed, as a lost or torn
// write leaves it: the page of the index that startup recovery reads to
// find running runs. Startup must fail with an error that names the file
// and says it looks corrupted and was not modified, and the file's bytes
// must be as they were.
func TestRun_CorruptedDatabase(t *testing.T) {
	dataDir, agentsDir := t.TempDir(), t.TempDir()
	writeFile(t, agentsDir, "quick.yaml", quickAgent)
	args := []string{"-addr", "127.0.0.1:0", "-config", "../../configs/kerneld.yaml",
		"-data-dir", dataDir, "-agents-dir", agentsDir}
	fillDatabase(t, args, 150)

	path := filepath.Join(dataDir, "kerneld.db")
	sqlitetest.ZeroInteriorPage(t, path, "runs_by_state")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	err = run(t.Context(), args, env(nil), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("kerneld started on a corrupted database")
	}
	t.Logf("startup error: %v", err)
	for _, want := range []string{path, "looks corrupted", "not modified"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("startup error does not say %q: %v", want, err)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the corrupted database was modified")
	}
}

// fillDatabase runs kerneld in-process with args and completes runs runs
// of the quick agent, each in its own session, then stops it cleanly.
func fillDatabase(t *testing.T, args []string, runs int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	// One client filling a database goes past a tenant's fair share.
	noQuotas := env(map[string]string{"KERNELD_REQUESTS_PER_SECOND": "0", "KERNELD_RUNS_PER_MINUTE": "0"})
	go func() { done <- run(ctx, args, noQuotas, io.Discard, logs) }()
	base := "http://" + waitAddr(t, logs.String)
	waitReady(t, base)
	for range runs {
		id := post(t, base+"/sessions", `{"agent":"quick"}`)["id"].(string)
		runID := post(t, base+"/sessions/"+id+"/run", `{"input":"fill the database"}`)["id"].(string)
		waitRunState(t, base, id, runID, "succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("kerneld: %v", err)
	}
}
