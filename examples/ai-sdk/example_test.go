//go:build examples

// Package aisdk_test runs the AI SDK example page (examples/ai-sdk) in
// Debian's Chromium against a real kerneld: useChat sends, streams,
// approves a tool call and picks up a running answer after a reload.
// Run it with `make test-examples` (go test -tags examples ./examples/...).
package aisdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// The page's agents: echo streams at a pace a person can watch, slow long
// enough to reload mid-answer, gated asks before it saves a note.
const (
	echoAgent = `
name: echo
description: echoes its input
model: {provider: scripted, token_delay: 20ms, script: [{text: "{input}"}]}
`
	slowAgent = `
name: slow
description: answers slowly
model: {provider: scripted, token_delay: 150ms, script: [{text: "a b c d e f g h i j k l m n o p q r s t u v w x y z"}]}
`
	gatedAgent = `
name: gated
description: saves a note once a person approves
model:
  provider: scripted
  script:
    - {text: "Saving your note.", tool_calls: [{name: memory_set, arguments: {key: note, value: "{input}"}}]}
    - {text: "Done."}
tools: [{name: memory_set, require_approval: true}]
approval_timeout: 1h
`
)

// result is what e2e.mjs reports the page showed.
type result struct {
	Echo       string   `json:"echo"`
	Approved   string   `json:"approved"`
	ToolState  string   `json:"toolState"`
	BeforeLoad int      `json:"beforeReload"` // words of the answer when the page reloaded
	Reloaded   string   `json:"reloaded"`
	PageErrors []string `json:"pageErrors"`
}

func TestExample_UseChat(t *testing.T) {
	chromium := needBrowser(t)
	dist := buildPage(t)
	var mu sync.Mutex
	var resumed []int // statuses of the reconnect requests
	srv := httpapitest.New(t, httpapitest.Options{
		Kernel: kerneltest.Options{Agents: []string{echoAgent, slowAgent, gatedAgent}},
		Wrap: func(api http.Handler) http.Handler {
			page := http.FileServer(http.Dir(dist))
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.URL.Path, "/agents/") && !strings.HasPrefix(r.URL.Path, "/sessions/") {
					page.ServeHTTP(w, r)
					return
				}
				rec := &statusRecorder{ResponseWriter: w}
				api.ServeHTTP(rec, r)
				if strings.HasSuffix(r.URL.Path, "/stream") {
					mu.Lock()
					resumed = append(resumed, rec.status)
					mu.Unlock()
				}
			})
		},
	})
	res := play(t, chromium, srv.URL)
	if res.Echo != "hello kerneld" {
		t.Errorf("echo answered %q, want %q", res.Echo, "hello kerneld")
	}
	if res.ToolState != "output-available" || !strings.HasSuffix(res.Approved, "Done.") {
		t.Errorf("after approval: tool %q, text %q; want output-available and ... Done.", res.ToolState, res.Approved)
	}
	if res.BeforeLoad >= 26 || res.Reloaded != "a b c d e f g h i j k l m n o p q r s t u v w x y z" {
		t.Errorf("reloaded at %d words, then showed %q: want a partial answer completed after the reload", res.BeforeLoad, res.Reloaded)
	}
	mu.Lock()
	defer mu.Unlock()
	if !containsStatus(resumed, http.StatusOK) {
		t.Errorf("the reloaded page never resumed a running answer (reconnect statuses %v)", resumed)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("the page threw: %v", res.PageErrors)
	}
}

// statusRecorder remembers the status a handler answered with and
// passes flushes through, so streams stream.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func containsStatus(statuses []int, want int) bool {
	for _, s := range statuses {
		if s == want {
			return true
		}
	}
	return false
}

// needBrowser returns the Chromium to drive, or skips t when it, node or
// the example's npm packages are missing (fails it instead under
// KERNELD_REQUIRE_BROWSER=1, which CI sets).
func needBrowser(t *testing.T) string {
	t.Helper()
	chromium := os.Getenv("KERNELD_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join("node_modules", "vite")); err != nil {
		missing = "the example's packages are not installed: `npm ci --prefix examples/ai-sdk` (make test-examples does it)"
	} else if _, err := os.Stat(chromium); err != nil {
		missing = "no Chromium at " + chromium + ": `apt-get install chromium`, or set KERNELD_CHROMIUM"
	}
	if missing == "" {
		return chromium
	}
	if os.Getenv("KERNELD_REQUIRE_BROWSER") == "1" {
		t.Fatalf("the example's browser test cannot run: %s (KERNELD_REQUIRE_BROWSER=1 requires it)", missing)
	}
	t.Skipf("skip the example's browser test: %s; set KERNELD_REQUIRE_BROWSER=1 to fail instead", missing)
	return ""
}

// buildPage builds the example page with Vite into a temporary directory.
func buildPage(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("node_modules", "vite", "bin", "vite.js"), "build", "--outDir", dist, "--emptyOutDir", "--logLevel", "warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vite build: %v\n%s", err, out)
	}
	return dist
}

// play runs e2e.mjs against the page at base and returns what it saw.
func play(t *testing.T, chromium, base string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "e2e.mjs")
	cmd.Env = append(os.Environ(), "BASE_URL="+base, "CHROMIUM="+chromium, "USER_DATA_DIR="+t.TempDir(),
		"SCREENSHOT="+filepath.Join(t.TempDir(), "reloaded.png"))
	if dir := os.Getenv("KERNELD_EXAMPLE_SCREENSHOTS"); dir != "" {
		cmd.Env = append(cmd.Env, "SCREENSHOT="+filepath.Join(dir, "ai-sdk-reloaded.png"))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res result
	found := false
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if body, ok := strings.CutPrefix(sc.Text(), "result "); ok {
			found = json.Unmarshal([]byte(body), &res) == nil
		}
	}
	if err != nil || !found {
		t.Fatalf("e2e.mjs: %v (result found: %v)\nstdout:\n%s\nstderr:\n%s", err, found, stdout.Bytes(), stderr.Bytes())
	}
	return res
}
