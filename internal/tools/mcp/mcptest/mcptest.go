// Package mcptest provides real MCP servers for tests: a small Go server
// (over streamable HTTP here, over stdio where a test binary re-executes
// itself), and the reference server, @modelcontextprotocol/server-everything,
// installed under test/mcp by `npm ci --prefix test/mcp`.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Message string `json:"message" jsonschema:"the text to send back"`
}

type sleepArgs struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

type noArgs struct{}

// NewServer returns the Go test server. Its tools: echo {message} returns
// message; sleep {ms} sleeps, then says "slept"; fail reports an error
// result; pid returns the server's process ID; crash calls crash mid-call.
// echo says it only reads (readOnlyHint) and sleep that calling it again
// does nothing more (idempotentHint); the others say neither.
func NewServer(crash func()) *mcpsdk.Server { return newServer(crash, func() {}) }

// newServer is NewServer calling sleepCancelled when a sleep call's
// context ends before its sleep does: the client gave up on the call.
func newServer(crash, sleepCancelled func()) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "kerneld-test", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo", Description: "Returns its message.",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoArgs) (*mcpsdk.CallToolResult, any, error) {
			return textResult(in.Message), nil, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "sleep", Description: "Sleeps, then says so.",
		Annotations: &mcpsdk.ToolAnnotations{IdempotentHint: true}},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, in sleepArgs) (*mcpsdk.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return textResult("slept"), nil, nil
			case <-ctx.Done():
				sleepCancelled()
				return nil, nil, ctx.Err()
			}
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "fail", Description: "Reports an error."},
		func(context.Context, *mcpsdk.CallToolRequest, noArgs) (*mcpsdk.CallToolResult, any, error) {
			res := textResult("it failed on purpose")
			res.IsError = true
			return res, nil, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "pid", Description: "Returns the server's process ID."},
		func(context.Context, *mcpsdk.CallToolRequest, noArgs) (*mcpsdk.CallToolResult, any, error) {
			return textResult(fmt.Sprint(os.Getpid())), nil, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "crash", Description: "Exits mid-call."},
		func(context.Context, *mcpsdk.CallToolRequest, noArgs) (*mcpsdk.CallToolResult, any, error) {
			crash()
			return textResult("still here"), nil, nil
		})
	return srv
}

func textResult(text string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}
}

// HTTPServer serves the Go test server over streamable HTTP and records
// the headers of every request it receives.
type HTTPServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	// cancelled receives once for each sleep call whose context ended
	// before its sleep did.
	cancelled chan struct{}
}

// ServeHTTP starts an HTTP test server, closed when the test ends (start it
// before what connects to it, so that the client is closed first). Its
// crash tool does nothing: it shares the test's process.
func ServeHTTP(tb testing.TB) *HTTPServer {
	tb.Helper()
	ts := &HTTPServer{cancelled: make(chan struct{}, 64)}
	srv := newServer(func() {}, func() {
		select {
		case ts.cancelled <- struct{}{}:
		default: // nobody is counting that many
		}
	})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.headers = append(ts.headers, r.Header.Clone())
		ts.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		ts.CloseClientConnections() // else Close waits for a client's open event stream
		ts.Close()
		for ss := range srv.Sessions() { // those no client ended with a DELETE
			_ = ss.Close()
		}
	})
	return ts
}

// SleepCancelled receives once for each sleep call the server saw
// cancelled: its caller stopped waiting before the sleep was over.
func (ts *HTTPServer) SleepCancelled() <-chan struct{} { return ts.cancelled }

// RequestHeaders returns the headers of every request so far.
func (ts *HTTPServer) RequestHeaders() []http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]http.Header(nil), ts.headers...)
}

// RequireEnv, set to 1, turns a missing reference server from a skip into
// a failure; CI sets it.
const RequireEnv = "KERNELD_REQUIRE_MCP"

const install = "npm ci --prefix test/mcp"

// Everything returns the command and arguments that run the reference
// server over stdio with node directly: no npm process in between, and a
// faster start. Without node or the package the test is skipped, or fails
// when RequireEnv is 1. Its get-env tool returns the server's environment.
func Everything(tb testing.TB) (command string, args []string) {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		SkipOrFail(tb, "node is not on PATH")
	}
	entry, err := everythingEntry()
	if err != nil {
		SkipOrFail(tb, "the reference MCP server is not installed: "+err.Error())
	}
	return node, []string{entry, "stdio"}
}

// EverythingNpx returns the command and arguments that run the reference
// server through npx, as agent files usually do.
func EverythingNpx(tb testing.TB) (command string, args []string) {
	tb.Helper()
	Everything(tb) // skips, or fails, without node and the package
	npx, err := exec.LookPath("npx")
	if err != nil {
		SkipOrFail(tb, "npx is not on PATH")
	}
	return npx, []string{"--prefix", packageDir(), "--no-install", "mcp-server-everything", "stdio"}
}

// SkipOrFail skips the test for reason, or fails it when RequireEnv is 1.
func SkipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%s; %s=1 requires the reference server: run `%s`", reason, RequireEnv, install)
	}
	tb.Skipf("%s: skipping the reference MCP server tests (run `%s`; set %s=1 to make this a failure)",
		reason, install, RequireEnv)
}

// packageDir is the repository's test/mcp, found from this file so that
// tests do not depend on their working directory.
func packageDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "test", "mcp")
}

// everythingEntry returns the absolute path of the package's bin script.
func everythingEntry() (string, error) {
	dir := filepath.Join(packageDir(), "node_modules", "@modelcontextprotocol", "server-everything")
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct {
		Bin json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", err
	}
	var bin string
	if err := json.Unmarshal(pkg.Bin, &bin); err != nil { // "bin": "path" or {"name": "path"}
		var bins map[string]string
		if err := json.Unmarshal(pkg.Bin, &bins); err != nil {
			return "", err
		}
		bin = bins["mcp-server-everything"]
	}
	entry := filepath.Join(dir, bin)
	_, err = os.Stat(entry)
	return entry, err
}
