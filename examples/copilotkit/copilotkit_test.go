//go:build examples

// Package copilotkit tests the CopilotKit example end to end: the page
// (Vite, React 19, @copilotkit/react-core) in Debian's Chromium, driven
// by playwright-core (browser.mjs), talking to the CopilotKit runtime
// (server.mjs, @copilotkit/runtime on node:http), whose agents are a
// kerneld's, started here in-process with the repository's demo agents.
//
// Its node_modules are large, so it is behind the build tag `examples`:
// `make test-examples` installs them (npm ci, no browser download) and
// runs it. It needs node on PATH and Chromium at /usr/bin/chromium (or
// $KERNELD_CHROMIUM); asked for by its tag, it fails without them.
package copilotkit

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// result is what browser.mjs reports the pages showed.
type result struct {
	Chat     []string `json:"chat"`
	Approve  approval `json:"approve"`
	Deny     approval `json:"deny"`
	Paint    []string `json:"paint"`
	Painted  string   `json:"background"`
	Restored []string `json:"restored"`
	// Continued is the restored thread after one more turn.
	Continued        []string `json:"continued"`
	StateBefore      string   `json:"stateBefore"`
	StateAfterReload string   `json:"stateAfterReload"`
	StateTranscript  []string `json:"stateTranscriptAfterReload"`
	ForeignRequests  []string `json:"foreignRequests"`
	PageErrors       []string `json:"pageErrors"`
}

// approval is what the page showed of one approval.
type approval struct {
	Asked      string   `json:"asked"`
	Transcript []string `json:"transcript"`
}

func TestCopilotKitExample(t *testing.T) {
	chromium := needTools(t)
	buildPage(t)
	kerneld := startKerneld(t)
	runtimeA, runtimeB := startRuntime(t, kerneld), startRuntime(t, kerneld)
	res := play(t, chromium, runtimeA, runtimeB)

	if len(res.ForeignRequests) > 0 {
		t.Errorf("the page requested other origins: %v", res.ForeignRequests)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("the page threw: %v", res.PageErrors)
	}
	chat := []string{"user: hello from CopilotKit", "assistant: hello from CopilotKit", "user: and a second turn", "assistant: and a second turn"}
	equal(t, "two turns on one thread", res.Chat, chat)
	equal(t, "the thread restored in a new profile through another runtime", res.Restored, chat)
	equal(t, "the restored thread, one turn later", res.Continued,
		append(chat, "user: a third turn after the reload", "assistant: a third turn after the reload"))
	equal(t, "kerneld's history of the chat", history(t, kerneld, "ck-chat"), res.Continued)

	asked := `Allow the call of tool memory_set with arguments {"key":"note","value":"buy milk"}?`
	if res.Approve.Asked != asked {
		t.Errorf("the approval asked %q, want %q", res.Approve.Asked, asked)
	}
	equal(t, "approved", res.Approve.Transcript, []string{"user: buy milk", "assistant: Saving your note.", "assistant: Saved your note."})
	equal(t, "denied", res.Deny.Transcript, []string{"user: buy eggs", "assistant: Saving your note.", "assistant: Not saved: you denied it."})
	if status, note := get(t, kerneld, "/sessions/ck-approve/memory/note"); status != http.StatusOK || !strings.Contains(note, `"value":"buy milk"`) {
		t.Errorf("after Approve the note is %d %s, want buy milk", status, note)
	}
	if status, note := get(t, kerneld, "/sessions/ck-deny/memory/note"); status != http.StatusNotFound {
		t.Errorf("after Deny the note is %d %s, want none", status, note)
	}
	for thread, want := range map[string]string{"ck-approve": "approved", "ck-deny": "denied"} {
		if got := approvalStates(t, kerneld, thread); strings.Join(got, ",") != want {
			t.Errorf("%s: approvals %v, want one %s", thread, got, want)
		}
	}

	equal(t, "frontend tool", res.Paint, []string{"user: rebeccapurple", "assistant: Painting the page.", "assistant: The page is painted."})
	if res.Painted != "rgb(102, 51, 153)" {
		t.Errorf("the page's background is %q, want rebeccapurple", res.Painted)
	}
	if got := history(t, kerneld, "ck-paint"); !slices.Contains(got, "tool: the background is rebeccapurple now") {
		t.Errorf("kerneld's history of the painted thread lacks the page's tool result: %q", got)
	}

	for what, got := range map[string]string{"set by the page": res.StateBefore, "after a reload": res.StateAfterReload} {
		if got != `{"mood":"calm"}` {
			t.Errorf("the state %s reads %s, want {\"mood\":\"calm\"}", what, got)
		}
	}
	equal(t, "the state's thread after a reload", res.StateTranscript, []string{"user: remember my mood", "assistant: remember my mood"})
	if !loggedState(t, kerneld, "ck-state", `{"mood":"calm"}`) {
		t.Error(`kerneld logged no STATE_SNAPSHOT {"mood":"calm"} for the state's thread`)
	}
}

// needTools returns Chromium's path, or fails t saying what is missing.
func needTools(t *testing.T) string {
	t.Helper()
	chromium := os.Getenv("KERNELD_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	switch _, nodeErr := exec.LookPath("node"); {
	case nodeErr != nil:
		t.Fatal("node is not on PATH (install Node.js 20 or later)")
	case !exists("node_modules/@copilotkit/runtime") || !exists("node_modules/playwright-core"):
		t.Fatal("the example's packages are not installed: run `make test-examples`, or `PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci` in examples/copilotkit")
	case !exists(chromium):
		t.Fatalf("no Chromium at %s: `apt-get install chromium`, or set KERNELD_CHROMIUM", chromium)
	}
	return chromium
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// buildPage builds the page into dist/, which server.mjs serves.
func buildPage(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", "node_modules/vite/bin/vite.js", "build", "--logLevel", "warn").CombinedOutput()
	if err != nil {
		t.Fatalf("vite build: %v\n%s", err, out)
	}
}

// startKerneld starts an in-process kerneld with the repository's demo
// agents the page talks to, and returns its URL. Only the model is
// scripted, by the agents' own files.
func startKerneld(t *testing.T) string {
	t.Helper()
	var defs []string
	for _, name := range []string{"echo", "gated", "painter"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "configs", "agents", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, string(b))
	}
	streams := httpapi.NewStreams(nil, httpapi.StreamOptions{})
	k := kerneltest.New(t, kerneltest.Options{Agents: defs, Observers: []kernel.Observer{streams}})
	srv := httpapi.New(k.Kernel, streams, httpapi.Options{OpenAPI: api.OpenAPI})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.RegisterOnShutdown(srv.CloseStreams)
	ts.Start()
	t.Cleanup(func() {
		srv.CloseStreams()
		ts.Close()
	})
	return ts.URL
}

// startRuntime starts server.mjs against kerneld on a free loopback port
// and returns its URL once it listens. It is stopped when the test ends.
func startRuntime(t *testing.T, kerneld string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", "server.mjs")
	cmd.Env = append(os.Environ(), "KERNELD_URL="+kerneld, "PORT=0", "COPILOTKIT_TELEMETRY_DISABLED=true")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server.mjs: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait() // killed: its error says so
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			url, _, _ := strings.Cut(rest, " ")
			go func() { _, _ = io.Copy(io.Discard, stdout) }() // drain until it exits
			return strings.TrimSuffix(url, "/")
		}
	}
	t.Fatal("server.mjs exited before it listened")
	return ""
}

// play runs browser.mjs against the two runtimes and returns its result.
func play(t *testing.T, chromium, runtimeA, runtimeB string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	shots := os.Getenv("SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	cmd := exec.CommandContext(ctx, "node", "browser.mjs")
	cmd.Env = append(os.Environ(), "RUNTIME_A="+runtimeA, "RUNTIME_B="+runtimeB, "CHROMIUM="+chromium,
		"USER_DATA_DIR="+t.TempDir(), "SHOTS="+shots)
	out, err := cmd.CombinedOutput()
	var res result
	found := false
	for line := range strings.Lines(string(out)) {
		if body, ok := strings.CutPrefix(strings.TrimSpace(line), "result "); ok {
			found = json.Unmarshal([]byte(body), &res) == nil
		}
	}
	if err != nil || !found {
		t.Fatalf("browser.mjs: %v (result read: %v; screenshots in %s)\n%s", err, found, shots, out)
	}
	return res
}

// get answers a GET of kerneld's API: the status and the body.
func get(t *testing.T, kerneld, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, kerneld+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// getData decodes the data list of a GET of kerneld's API.
func getData[T any](t *testing.T, kerneld, path string) []T {
	t.Helper()
	status, body := get(t, kerneld, path)
	var page struct{ Data []T }
	if err := json.Unmarshal([]byte(body), &page); status != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %s (%v)", path, status, body, err)
	}
	return page.Data
}

// history is kerneld's conversation of thread, each message as "role: text".
func history(t *testing.T, kerneld, thread string) []string {
	t.Helper()
	var out []string
	for _, m := range getData[struct{ Role, Content string }](t, kerneld, "/sessions/"+thread+"/messages") {
		out = append(out, m.Role+": "+m.Content)
	}
	return out
}

// approvalStates lists the states of the approvals of thread's runs.
func approvalStates(t *testing.T, kerneld, thread string) []string {
	t.Helper()
	var out []string
	for _, run := range getData[struct{ ID string }](t, kerneld, "/sessions/"+thread+"/runs") {
		for _, a := range getData[struct{ State string }](t, kerneld, "/sessions/"+thread+"/runs/"+run.ID+"/approvals") {
			out = append(out, a.State)
		}
	}
	return out
}

// loggedState reports whether thread's log holds a STATE_SNAPSHOT of want.
func loggedState(t *testing.T, kerneld, thread, want string) bool {
	t.Helper()
	for _, ev := range getData[struct {
		Type     string
		Snapshot json.RawMessage
	}](t, kerneld, "/sessions/"+thread+"/events") {
		if ev.Type == "STATE_SNAPSHOT" && string(ev.Snapshot) == want {
			return true
		}
	}
	return false
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
