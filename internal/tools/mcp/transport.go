package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// terminateDuration is how long closing a stdio session waits for the
	// server to exit after its stdin closes, before signalling it. Some
	// servers (server-everything among them) ignore stdin closing, and the
	// SDK's default of 5s would make every stop take 5s.
	terminateDuration = 500 * time.Millisecond
	// killGrace is how long the process group has to exit after SIGTERM
	// before it gets SIGKILL.
	killGrace = 2 * time.Second
	// waitDelay bounds how long reaping a command waits for its stderr to
	// close, which a grandchild holding it open could otherwise delay until
	// the group is killed.
	waitDelay = time.Second
	// maxStderrLog bounds how much of one stderr write is logged.
	maxStderrLog = 2048
)

// clientImpl is how kerneld introduces itself to servers.
var clientImpl = &mcpsdk.Implementation{Name: "kerneld", Version: "1"}

// instance is one connected incarnation of a server: its session, the
// tools it listed, and for a command the process group to clean up.
type instance struct {
	session *mcpsdk.ClientSession
	tools   []*mcpsdk.Tool
	pid     int             // the command's process (and group) ID; 0 for HTTP
	http    *http.Transport // the HTTP transport's connection pool; nil for stdio
	started time.Time
	// ctx ends when the instance stops, with the reason as its cause; calls
	// in flight end with it, since closing a session waits for them.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex // guards the fields below
	stopping bool
	calls    int           // calls in flight
	idle     chan struct{} // closed when calls drops to 0 while stopping

	stopOnce sync.Once
}

// connect starts or dials the server cfg describes, initializes the session
// and lists its tools. On failure nothing is left running.
func connect(ctx context.Context, cfg ServerConfig, log *slog.Logger) (*instance, error) {
	inst := &instance{}
	inst.ctx, inst.cancel = context.WithCancelCause(context.Background())
	var (
		t   mcpsdk.Transport
		cmd *exec.Cmd
	)
	if cfg.Command != "" {
		cmd = command(cfg, log)
		t = &mcpsdk.CommandTransport{Command: cmd, TerminateDuration: terminateDuration}
	} else {
		inst.http = newHTTPTransport()
		t = &mcpsdk.StreamableClientTransport{
			Endpoint:   cfg.URL,
			HTTPClient: &http.Client{Transport: &headerTransport{base: inst.http, headers: cfg.Headers}},
		}
	}
	client := mcpsdk.NewClient(clientImpl, &mcpsdk.ClientOptions{Logger: log})
	session, err := client.Connect(ctx, t, nil)
	if cmd != nil && cmd.Process != nil {
		inst.pid = cmd.Process.Pid
	}
	if err != nil {
		inst.stop(err) // the SDK has closed the session; the group may remain
		return nil, err
	}
	inst.session, inst.started = session, time.Now()
	if inst.tools, err = listTools(ctx, session); err != nil {
		err = fmt.Errorf("list tools: %w", err)
		inst.stop(err)
		return nil, err
	}
	return inst, nil
}

// inheritedEnv are the variables a server gets from kerneld's own
// environment, the ones the official MCP SDKs pass on: enough to find and
// run a program, and nothing else. kerneld's environment holds model API
// keys, and a server may hand its environment to the model (the reference
// server has a tool that does exactly that).
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// command builds the server's command: its environment is inheritedEnv
// plus cfg.Env, and it leads a process group of its own so that stopping
// it reaches every process it started (npx runs npm, which runs sh, which
// runs node).
func command(cfg ServerConfig, log *slog.Logger) *exec.Cmd {
	// Not CommandContext: a context would SIGKILL the command alone, where
	// instance.stop closes stdin first and then signals the whole group.
	cmd := exec.Command(cfg.Command, cfg.Args...) //nolint:noctx // ended by instance.stop
	cmd.Env = serverEnv(os.LookupEnv, cfg.Env)
	cmd.Stderr = &stderrLog{log: log}
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)
	return cmd
}

// serverEnv is the environment of a stdio server: the inherited variables
// that are set, then the configured ones, which win.
func serverEnv(lookup func(string) (string, bool), configured map[string]string) []string {
	env := make([]string, 0, len(inheritedEnv)+len(configured))
	for _, k := range inheritedEnv {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(configured)) {
		env = append(env, k+"="+configured[k])
	}
	return env
}

// newHTTPTransport returns a connection pool of the server's own, so that
// stopping it can close its idle connections.
func newHTTPTransport() *http.Transport {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return t.Clone()
	}
	return &http.Transport{Proxy: http.ProxyFromEnvironment}
}

// listTools returns every tool the server lists, across pages.
func listTools(ctx context.Context, session *mcpsdk.ClientSession) ([]*mcpsdk.Tool, error) {
	var ts []*mcpsdk.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// stop ends the instance for the given reason and waits: it cancels the
// calls in flight and gives them terminateDuration to return (so their
// cancellations reach the server before the session closes), closes the
// session (for a command: closes stdin, then after terminateDuration sends
// SIGTERM to the whole group, and reaps the command), then kills whatever
// is left of the group. It is safe to call more than once and from several
// goroutines; all return once it is done.
func (inst *instance) stop(cause error) {
	inst.stopOnce.Do(func() {
		idle := inst.beginStop()
		inst.cancel(cause)
		select {
		case <-idle:
		case <-time.After(terminateDuration):
		}
		if inst.session != nil {
			inst.closeSession()
		}
		if inst.pid != 0 {
			killGroup(inst.pid, killGrace)
		}
		if inst.http != nil {
			inst.http.CloseIdleConnections()
		}
	})
}

// beginStop refuses new calls and returns a channel closed once no call
// is in flight.
func (inst *instance) beginStop() <-chan struct{} {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.stopping = true
	inst.idle = make(chan struct{})
	if inst.calls == 0 {
		close(inst.idle)
	}
	return inst.idle
}

// beginCall counts a call in flight. It reports false once the instance is
// stopping; otherwise the caller must call endCall.
func (inst *instance) beginCall() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.stopping {
		return false
	}
	inst.calls++
	return true
}

// endCall ends a call counted by beginCall.
func (inst *instance) endCall() {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.calls--
	if inst.calls == 0 && inst.stopping {
		close(inst.idle)
	}
}

// closeSession closes the session. For a command the SDK signals only the
// command itself once terminateDuration has passed; the rest of its group
// (npx's node, say) gets SIGTERM at the same moment, so that a wrapper
// does not wait for children that ignore stdin closing.
func (inst *instance) closeSession() {
	done := make(chan struct{})
	go func() {
		_ = inst.session.Close() // the error only says how the server ended
		close(done)
	}()
	if inst.pid != 0 {
		select {
		case <-done:
			return
		case <-time.After(terminateDuration):
			terminateGroup(inst.pid)
		}
	}
	<-done
}

// logArgs are the attributes that identify the instance in logs.
func (inst *instance) logArgs() []any {
	if inst.pid == 0 {
		return nil
	}
	return []any{"pid", inst.pid}
}

// headerTransport adds configured headers to every request the MCP client
// sends, without replacing those the client sets itself.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context()) // a RoundTripper must not modify its request
		for k, v := range t.headers {
			if req.Header.Get(k) == "" {
				req.Header.Set(k, v)
			}
		}
	}
	return t.base.RoundTrip(req)
}

// stderrLog logs what a server writes to stderr, where servers report why
// they cannot start.
type stderrLog struct{ log *slog.Logger }

func (w *stderrLog) Write(p []byte) (int, error) {
	text := strings.TrimRight(string(p[:min(len(p), maxStderrLog)]), "\r\n")
	if text != "" {
		w.log.Info("mcp server stderr", "text", text)
	}
	return len(p), nil
}

// schemaOf returns t's input schema as JSON, or an empty object schema.
func schemaOf(t *mcpsdk.Tool) json.RawMessage {
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" {
			return b
		}
	}
	return json.RawMessage(`{"type":"object"}`)
}
