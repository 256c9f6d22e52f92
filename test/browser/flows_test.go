package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// The agents of the flows below, as configs/agents has them but quicker.
const (
	// mcpSessionAgent has no MCP server of its own: it calls the echo tool
	// of the server its session attaches as "everything".
	mcpSessionAgent = `
name: mcp-session
description: Calls everything__echo from the MCP server attached to its session.
model:
  provider: scripted
  token_delay: 5ms
  script:
    - text: "Let me ask the server attached to this session."
      tool_calls: [{name: everything__echo, arguments: {message: "{input}"}}]
    - text: "The server has answered."
`
	dispatcherAgent = `
name: dispatcher
description: Hands your input to echo in the background.
model:
  provider: scripted
  token_delay: 5ms
  script:
    - text: "I have asked echo in the background."
      tool_calls: [{name: spawn_agent, arguments: {agent: echo, input: "{input}", wait: false}}]
    - text: "Echo is at work; its answer will arrive here."
  replies:
    - {starts_with: "[child_result]", text: "Echo's answer has arrived."}
tools: [spawn_agent]
child_agents: [echo]
child_results: queue
`
	writerAgent = `
name: writer
description: Drafts an answer; critic may take turns.
model: {provider: scripted, token_delay: 5ms, script: [{text: "Draft: {input}"}]}
peers: [critic]
`
	criticAgent = `
name: critic
description: Reviews the writer's drafts.
model: {provider: scripted, token_delay: 5ms, script: [{text: "Critique: {input}"}]}
peers: [writer]
`
)

// startReferenceMCP runs the reference MCP server (test/mcp) over
// streamable HTTP on a free loopback port, stopped when the test ends,
// and returns its endpoint. Without node or the package the test skips,
// or fails when KERNELD_REQUIRE_MCP=1.
func startReferenceMCP(t *testing.T) string {
	t.Helper()
	node, args := mcptest.Everything(t)
	port := freePort(t)
	cmd := exec.Command(node, args[0], "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the reference MCP server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// It says so on stderr once it listens (or that it cannot).
	listening := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				listening <- nil
				break
			}
		}
		if sc.Err() == nil {
			listening <- fmt.Errorf("the reference MCP server ended before it listened")
		}
		for sc.Scan() { // keep the pipe drained until the server ends
		}
	}()
	select {
	case err := <-listening:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reference MCP server did not listen within 30 s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// flowResult is what the scenarios of these flows report beside result.
type flowResult struct {
	Servers   []string // the MCP panel's servers: "name|state"
	Detached  []string
	Refused   string // the problem a refused change showed
	Schedules []string
	Cancelled []string
	Agents    []string // the choices of "Answered by"
	Wide      measures
	Narrow    measures
}

func flowOf(t *testing.T, res result) flowResult {
	t.Helper()
	var f flowResult
	if err := json.Unmarshal(res.Raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// shotsDir is where a scenario keeps its pictures: KERNELD_SCREENSHOTS,
// or the test's temporary directory.
func shotsDir(t *testing.T) string {
	if dir := os.Getenv("KERNELD_SCREENSHOTS"); dir != "" {
		return dir
	}
	return t.TempDir()
}

// whoSaid lists the transcript's messages as "who: text", as the page
// labels them.
func whoSaid(items []item) []string {
	var out []string
	for _, it := range items {
		if it.Kind == "message" {
			out = append(out, it.Who+": "+it.Text)
		}
	}
	return out
}

// TestConsole_SessionMCP: the reference MCP server, attached to a session
// from its MCP panel with a header naming a secret, serves the tool the
// agent calls; the panel shows it stopped, then running; a bad name is
// refused with kerneld's problem; Detach takes it away. The panel fits at
// 1280 and 390 px.
func TestConsole_SessionMCP(t *testing.T) {
	b := needBrowser(t)
	url := startReferenceMCP(t)
	k := startKerneldWith(t, extras{
		agents: []string{mcpSessionAgent},
		sessionMCP: kernel.SessionMCP{Secret: func(tenant, name string) (string, bool) {
			return "s3cret", tenant == httpapi.DefaultTenant && name == "DOCS_TOKEN"
		}},
	}, httpapi.Options{})
	res := b.play(t, k, "mcp", "MCP_URL="+url, "SHOTS="+shotsDir(t))
	f := flowOf(t, res)

	equal(t, "the panel before the run", f.Servers[:1], []string{"everything|stopped"})
	equal(t, "the panel after the run", f.Servers[1:], []string{"everything|running"})
	equal(t, "conversation", kinds(res.Transcript), []string{"message", "message", "tool everything__echo done", "message"})
	for _, want := range []string{"(400)", "mcp_servers[1].name"} {
		if !strings.Contains(f.Refused, want) {
			t.Errorf("the refused attach showed %q, want it to contain %q", f.Refused, want)
		}
	}
	if len(f.Detached) != 0 {
		t.Errorf("after Detach the panel lists %q, want nothing", f.Detached)
	}
	s, err := k.kernel.GetSession(tenantContext(t), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.MCPServers) != 0 {
		t.Errorf("the session keeps %+v after Detach", s.MCPServers)
	}
	for name, m := range map[string]measures{"1280 px": f.Wide, "390 px": f.Narrow} {
		for _, p := range m.Problems {
			t.Errorf("%s, MCP panel: %s", name, p)
		}
	}
}

// TestConsole_BackgroundChild: the dispatcher's run ends at once, its
// background child shows as such, and the child's answer arrives live as
// an input labelled with the child's agent, which the dispatcher answers.
func TestConsole_BackgroundChild(t *testing.T) {
	b := needBrowser(t)
	k := startKerneldWith(t, extras{agents: []string{dispatcherAgent}}, httpapi.Options{})
	res := b.play(t, k, "background", "SHOTS="+shotsDir(t))

	said := whoSaid(res.Transcript)
	if len(said) == 5 && strings.HasPrefix(said[3], "Answer from echo: [child_result] ") && strings.HasSuffix(said[3], "Its answer:\nHello, background") {
		said[3] = "Answer from echo: …Hello, background"
	}
	equal(t, "conversation", said, []string{
		"You: Hello, background",
		"assistant: I have asked echo in the background.",
		"assistant: Echo is at work; its answer will arrive here.",
		"Answer from echo: …Hello, background",
		"assistant: Echo's answer has arrived.",
	})
	var child *item
	for i := range res.Transcript {
		if strings.Contains(res.Transcript[i].Kind, "background") {
			child = &res.Transcript[i]
		}
	}
	if child == nil || !strings.Contains(child.Text, "finished") {
		t.Errorf("the background child shows %+v, want it finished", child)
	}
}

// TestConsole_Schedule: a reminder scheduled from the Schedules panel for
// now fires, and its input shows as scheduled with its answer; a daily
// schedule is listed with when it fires next and cancelled; an interval
// under kerneld's minimum is refused with kerneld's problem.
func TestConsole_Schedule(t *testing.T) {
	b := needBrowser(t)
	store := memory.New()
	runner := &kernelRunner{}
	svc, err := schedule.New(schedule.Options{Store: store, Runner: runner, Poll: 50 * time.Millisecond,
		Limits: schedule.Limits{MinEvery: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	k := startKerneldWith(t, extras{store: store}, httpapi.Options{Schedules: svc})
	runner.kernel = k.kernel.Kernel
	svc.Start()
	t.Cleanup(func() { _ = svc.Close(context.Background()) }) // before the kernel closes
	res := b.play(t, k, "schedule", "SHOTS="+shotsDir(t))
	f := flowOf(t, res)

	equal(t, "conversation", whoSaid(res.Transcript), []string{
		"Scheduled: Remind me to stretch.", "assistant: Remind me to stretch.",
	})
	if len(f.Schedules) != 1 || !strings.Contains(f.Schedules[0], "Summarise the day.") ||
		!strings.Contains(f.Schedules[0], "every 24h") || !strings.Contains(f.Schedules[0], "next ") {
		t.Errorf("the panel lists %q, want the daily schedule with when it fires next", f.Schedules)
	}
	if len(f.Cancelled) != 0 {
		t.Errorf("after Cancel the panel lists %q, want nothing", f.Cancelled)
	}
	for _, want := range []string{"(400)", "every"} {
		if !strings.Contains(f.Refused, want) {
			t.Errorf("the refused schedule showed %q, want it to contain %q", f.Refused, want)
		}
	}
	for name, m := range map[string]measures{"1280 px": f.Wide, "390 px": f.Narrow} {
		for _, p := range m.Problems {
			t.Errorf("%s, Schedules panel: %s", name, p)
		}
	}
}

// kernelRunner fires a schedule into the kernel, as kerneld's does.
type kernelRunner struct{ kernel *kernel.Kernel }

func (r *kernelRunner) Run(ctx context.Context, req schedule.RunRequest) (schedule.RunResult, error) {
	ctx = kernel.WithTenant(ctx, req.Tenant)
	run, _, err := r.kernel.Run(ctx, req.SessionID, kernel.RunRequest{
		Input: req.Input, IfBusy: kernel.BusyPolicy(req.IfBusy), IdempotencyKey: req.IdempotencyKey, Source: req.Source,
	})
	if err != nil {
		return schedule.RunResult{}, err
	}
	return schedule.RunResult{RunID: run.ID, Queued: run.State == session.RunQueued}, nil
}

// TestConsole_Handoff: a writer session offers its peer critic under
// "Answered by" with nothing set up beforehand; picking it hands the
// next input to critic, which sees the same conversation, and each
// answer says who wrote it, also in a tab that draws it from a snapshot.
func TestConsole_Handoff(t *testing.T) {
	b := needBrowser(t)
	k := startKerneldWith(t, extras{agents: []string{writerAgent, criticAgent}}, httpapi.Options{})
	res := b.play(t, k, "handoff", "SHOTS="+shotsDir(t))
	f := flowOf(t, res)

	equal(t, "Answered by", f.Agents, []string{"writer", "critic"})
	said := []string{
		"You: a haiku about queues", "assistant: Draft: a haiku about queues",
		"You: too long?", "critic: Critique: too long?",
	}
	equal(t, "conversation", whoSaid(res.Transcript), said)
	equal(t, "conversation in a new tab, from a snapshot", whoSaid(res.Other), said)
	s, err := k.kernel.GetSession(tenantContext(t), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "the session's agents", s.Agents, []string{"critic"})
}
