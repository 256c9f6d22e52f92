// Package browser tests the web console in a real browser: Debian's
// Chromium, driven by playwright-core (console.mjs) against a kerneld
// this test starts in-process, with scripted agents.
//
// The tests need node on PATH, `npm ci --prefix test/browser` (with
// PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1: no browser is ever downloaded) and
// Chromium at /usr/bin/chromium (or $KERNELD_CHROMIUM). Without them they
// skip and say why, unless KERNELD_REQUIRE_BROWSER=1, which CI sets.
//
// go test ./test/browser -update rewrites docs/console.png, the README's
// picture of the console mid-run.
package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/feed"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/openai"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

var update = flag.Bool("update", false, "rewrite docs/console.png")

// The agents the console is tried with. Only the model is scripted.
const (
	echoAgent = `
name: echo
description: Echoes your input back, token by token.
model: {provider: scripted, token_delay: 5ms, script: [{text: "{input}"}]}
`
	// pacedAgent thinks, reads the clock, asks before saving to memory,
	// then answers slowly: long enough to reload the page mid-answer.
	pacedAgent = `
name: paced
description: Thinks, asks before it saves to memory, then answers at reading pace.
model:
  provider: scripted
  token_delay: 40ms
  script:
    - reasoning: "The user named a colour. I should check the time and keep the colour in memory, which needs their approval."
      text: "I'll keep that in mind."
      tool_calls:
        - {name: current_time, arguments: {timezone: UTC}}
        - {name: memory_set, arguments: {key: favourite_colour, value: "{input}"}}
    - text: "` + pacedAnswer + `"
tools: [current_time, {name: memory_set, require_approval: true}]
approval_timeout: 1h
`
	pacedAnswer = "Saved: your favourite colour is now in this session's memory, so every later run " +
		"of this conversation starts with it in view. Ask me about it whenever you like, or tell me " +
		"another colour and I will ask you again before I change what I keep. Nothing is saved " +
		"without your approval, and you can deny any call with a reason that I will read."
	gatedAgent = `
name: gated
description: Saves two settings, each with permission.
model:
  provider: scripted
  script:
    - text: "Saving your settings."
      tool_calls:
        - {name: memory_set, arguments: {key: theme, value: dark}}
        - {name: memory_set, arguments: {key: language, value: fr}}
    - text: "Done."
tools: [{name: memory_set, require_approval: true}]
approval_timeout: 1h
`
	// waiterAgent calls the test tool "wait", which blocks until the run is
	// cancelled: the run is certainly active when the test stops it.
	waiterAgent = `
name: waiter
description: Calls a tool that waits until the run is stopped.
model:
  provider: scripted
  script:
    - {text: "Working on it.", tool_calls: [{name: wait}]}
    - {text: "Done."}
tools: [wait]
`
	delegatorAgent = `
name: delegator
description: Asks echo, in a child session.
model:
  provider: scripted
  script:
    - {text: "Asking echo.", tool_calls: [{name: spawn_agent, arguments: {agent: echo, input: "{input}"}}]}
    - {text: "Echo answered."}
tools: [spawn_agent]
child_agents: [echo]
`
	failingAgent = `
name: failing
description: Fails mid-answer.
model: {provider: scripted, script: [{text: "one two three four"}], error: "the model is overloaded", fail_after_tokens: 2}
`
	unavailableAgent = `
name: offline
description: Needs a model that is not configured.
model: {provider: openai, name: gpt-4o-mini, api_key: "${OPENAI_API_KEY}"}
`
)

// browser is what the tests need to drive the console.
type browser struct {
	chromium string
}

// needBrowser returns the browser, or skips t saying what is missing, or
// fails it when KERNELD_REQUIRE_BROWSER=1.
func needBrowser(t *testing.T) browser {
	t.Helper()
	b := browser{chromium: os.Getenv("KERNELD_CHROMIUM")}
	if b.chromium == "" {
		b.chromium = "/usr/bin/chromium"
	}
	var missing string
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH (install Node.js 20 or later)"
	} else if _, err := os.Stat(filepath.Join("node_modules", "playwright-core")); err != nil {
		missing = "playwright-core is not installed: run `PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix test/browser`"
	} else if _, err := os.Stat(b.chromium); err != nil {
		missing = fmt.Sprintf("no Chromium at %s: `apt-get install chromium`, or set KERNELD_CHROMIUM", b.chromium)
	}
	if missing != "" {
		if os.Getenv("KERNELD_REQUIRE_BROWSER") == "1" {
			t.Fatalf("browser tests cannot run: %s (KERNELD_REQUIRE_BROWSER=1 requires them)", missing)
		}
		t.Skipf("skip browser test: %s; set KERNELD_REQUIRE_BROWSER=1 to fail instead", missing)
	}
	return b
}

// kerneld is an in-process kerneld serving the console.
type kerneld struct {
	url    string
	kernel *kerneltest.Kernel
	server *httptest.Server
}

func startKerneld(t *testing.T, opts httpapi.Options, observers ...kernel.Observer) *kerneld {
	t.Helper()
	return startKerneldWith(t, extras{}, opts, observers...)
}

// extras are what a test adds to the kerneld startKerneld starts: more
// agents, the MCP servers sessions may attach, and a store to share with
// what the test builds on it (schedules).
type extras struct {
	agents     []string
	sessionMCP kernel.SessionMCP
	store      *memory.Store
}

func startKerneldWith(t *testing.T, x extras, opts httpapi.Options, observers ...kernel.Observer) *kerneld {
	t.Helper()
	streams := httpapi.NewStreams(nil, httpapi.StreamOptions{})
	store := x.store
	if store == nil {
		store = memory.New()
	}
	sessionFeed := feed.New(feed.Options{Log: store})
	k := kerneltest.New(t, kerneltest.Options{
		Agents: append([]string{echoAgent, pacedAgent, gatedAgent, waiterAgent, delegatorAgent, failingAgent,
			unavailableAgent}, x.agents...),
		// streams first: the others come after the page heard
		Observers:  append([]kernel.Observer{streams, sessionFeed}, observers...),
		Providers:  map[string]llm.Factory{"openai": openai.New},
		Store:      store,
		Feed:       sessionFeed,
		Titles:     kernel.Titles{Enabled: true, Generate: true}, // as kerneld's defaults: scripted agents get the first words
		SessionMCP: x.sessionMCP,
	})
	sessionFeed.Start(k.FeedSummary)
	t.Cleanup(func() { _ = sessionFeed.Close(context.Background()) }) // before the kernel closes
	opts.OpenAPI = api.OpenAPI
	opts.Feed = sessionFeed
	if opts.Images == nil {
		opts.Images = k.Images // the library the kernel keeps them in
	}
	srv := httpapi.New(k.Kernel, streams, opts)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.RegisterOnShutdown(srv.CloseStreams)
	ts.Start()
	t.Cleanup(func() {
		srv.CloseStreams()
		ts.Close()
	})
	return &kerneld{url: ts.URL, kernel: k, server: ts}
}

// slowEnds delays each run's recorded end after its RUN_FINISHED or
// RUN_ERROR reached the streams, as a busy store does: a page that reads
// the session on that event reads it still running.
type slowEnds struct{ delay time.Duration }

func (o slowEnds) ObserveEvents(evs []session.Event) {
	for _, ev := range evs {
		if ev.Type.Ends() {
			time.Sleep(o.delay)
		}
	}
}

func (slowEnds) ObserveSessionEnded(string, int64) {}

// item is one entry of the conversation as the page rendered it.
type item struct {
	Kind  string `json:"kind"`
	Role  string `json:"role"`
	Who   string `json:"who"` // how the page labels a message
	Name  string `json:"name"`
	State string `json:"state"`
	Text  string `json:"text"`
	Open  bool   `json:"open"`
}

// controls is what of a session's controls the page let a person use.
type controls struct {
	Input, Send, Fork, Close, Regenerate bool
	Placeholder                          string
	Problem                              string
}

// measures is what console.mjs found out of reach on a page.
type measures struct {
	Problems            []string
	PageScrolls         bool
	SessionsTop         int
	ViewportHeight      int
	ComposerOnScreen    bool
	ConversationScrolls bool
	AtEnd               bool
}

// result is what console.mjs reports of a scenario.
type result struct {
	ID      string   `json:"id"`
	Agents  []string `json:"agents"`
	Offline struct {
		About     string
		Startable bool
	} `json:"offline"`
	ClosedView   controls `json:"closedView"`
	Next         controls `json:"next"`
	Deleted      controls `json:"deleted"`
	Wide, Narrow struct {
		Home, Session, Streaming, Settings, Inbox measures
	}
	Listed          []string `json:"listed"`
	Transcript      []item   `json:"transcript"`
	Restored        []item   `json:"restored"`
	Args            []string `json:"args"`
	Child           []item   `json:"child"`
	Other           []item   `json:"other"` // a second tab's
	Regenerated     []item   `json:"regenerated"`
	Forked          []item   `json:"forked"`
	Closed          bool     `json:"closed"`
	Failed          []item   `json:"failed"`
	Problem         string   `json:"problem"`
	BusyProblem     string   `json:"busyProblem"`
	ForeignRequests []string `json:"foreignRequests"`
	PageErrors      []string `json:"pageErrors"`
	Streams         []string `json:"streams"` // the query of each event stream request
	// Raw is the whole result, for a scenario that reports more.
	Raw json.RawMessage `json:"-"`
}

// play runs scenario in a fresh browser profile against k and returns
// what the page showed. env adds to console.mjs's environment.
func (b browser) play(t *testing.T, k *kerneld, scenario string, env ...string) result {
	t.Helper()
	return b.playSteps(t, k, scenario, nil, env...)
}

// playSteps is play for a scenario that asks the test to act: each line
// "step <name>" it prints is handed to onStep, which acts before the
// scenario goes on to wait for the page to show the effect.
func (b browser) playSteps(t *testing.T, k *kerneld, scenario string, onStep func(string), env ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "console.mjs", scenario)
	cmd.Env = append(os.Environ(), append(env, "BASE_URL="+k.url, "CHROMIUM="+b.chromium, "USER_DATA_DIR="+t.TempDir())...)
	var stderr, stdout bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start console.mjs: %v", err)
	}
	var res result
	found := false
	sc := bufio.NewScanner(pipe)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		stdout.WriteString(line + "\n")
		if step, ok := strings.CutPrefix(line, "step "); ok && onStep != nil {
			onStep(step)
		}
		if body, ok := strings.CutPrefix(line, "result "); ok {
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				t.Errorf("console.mjs %s: decode result: %v\n%s", scenario, err, body)
			}
			res.Raw = json.RawMessage(body)
			found = true
		}
	}
	if err := cmd.Wait(); err != nil || !found {
		t.Fatalf("console.mjs %s: %v (result found: %v)\nstdout:\n%s\nstderr:\n%s", scenario, err, found, stdout.Bytes(), stderr.Bytes())
	}
	if len(res.ForeignRequests) > 0 {
		t.Errorf("the console requested other origins: %v", res.ForeignRequests)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("the page threw: %v", res.PageErrors)
	}
	return res
}

// seedSessions gives the sessions list of the screenshot some named
// sessions with an answered run each.
func seedSessions(t *testing.T, k *kerneld, names ...string) {
	t.Helper()
	ctx := tenantContext(t)
	for _, name := range names {
		s, err := k.kernel.CreateSession(ctx, kernel.CreateSession{Agent: "echo", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := k.kernel.Run(ctx, s.ID, kernel.RunRequest{Input: name}); err != nil {
			t.Fatal(err)
		}
	}
}

// tenantContext is the context of the tenant every request acts as when
// no API keys are set.
func tenantContext(t *testing.T) context.Context {
	return kernel.WithTenant(t.Context(), httpapi.DefaultTenant)
}

// messages keeps the transcript's messages as "role: text".
func messages(items []item) []string {
	var out []string
	for _, it := range items {
		if it.Kind == "message" {
			out = append(out, it.Role+": "+it.Text)
		}
	}
	return out
}

// kinds lists the transcript's item kinds, with tool names.
func kinds(items []item) []string {
	var out []string
	for _, it := range items {
		switch it.Kind {
		case "tool":
			out = append(out, "tool "+it.Name+" "+it.State)
		default:
			out = append(out, it.Kind)
		}
	}
	return out
}

// wantResumes checks that the page read the stream from a snapshot once,
// then at least n-1 more times, each resuming after the last event it had
// rather than replaying what it already showed. Two may resume at the
// same event: a stream parked while its session was idle (see app.js)
// resumes where it stopped.
func wantResumes(t *testing.T, streams []string, n int) {
	t.Helper()
	if len(streams) < n || streams[0] != "?snapshot=messages" {
		t.Fatalf("event stream requests %q, want ?snapshot=messages and then %d resumes", streams, n-1)
	}
	last := int64(0)
	for _, q := range streams[1:] {
		var after int64
		if _, err := fmt.Sscanf(q, "?after=%d", &after); err != nil || after < last {
			t.Errorf("event stream requests %q: %q does not resume after %d", streams, q, last)
		}
		last = after
	}
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestConsole_Image: an image chosen in the composer goes with the
// message, and the message shows it, fetched from kerneld.
func TestConsole_Image(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "image")
	var raw struct {
		Image string `json:"image"`
	}
	if err := json.Unmarshal(res.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(raw.Image, "data:image/png;base64,iVBORw0KGgo") {
		t.Errorf("the user message shows %q, want the PNG it carries", raw.Image)
	}
	equal(t, "conversation", messages(res.Transcript), []string{"user: what is this?", "assistant: what is this?"})
}

func TestConsole_Chat(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "chat")

	agents := strings.Join(res.Agents, "\n")
	for _, want := range []string{"echo", "offline (unavailable)", "Echoes your input back"} {
		if !strings.Contains(agents, want) {
			t.Errorf("the agent picker lacks %q:\n%s", want, agents)
		}
	}
	if !strings.Contains(res.Offline.About, "Unavailable: ") || res.Offline.Startable {
		t.Errorf("the unavailable agent, picked, shows %q and New enabled %v; want why, and New disabled", res.Offline.About, res.Offline.Startable)
	}
	equal(t, "sessions of echo, completed", res.Listed, []string{res.ID})
	chat := []string{
		"user: hello from the browser", "assistant: hello from the browser",
		"user: and a second line", "assistant: and a second line",
	}
	equal(t, "conversation", messages(res.Transcript), chat)
	equal(t, "regenerated, in a fork", messages(res.Regenerated), chat)
	equal(t, "forked", messages(res.Forked), chat)
	if !res.Closed {
		t.Error("the closed fork still takes input")
	}
}

// TestConsole_Lifecycle: Regenerate in a fork before anything is sent to
// it, the message box of a session opened after a closed one, a link to
// a deleted session, and a header that reads the session while kerneld
// still records the end of its run (each run's end is held back 300 ms
// after the page heard it).
func TestConsole_Lifecycle(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{}, slowEnds{delay: 300 * time.Millisecond})
	res := b.play(t, k, "lifecycle")

	equal(t, "regenerated in the fork", messages(res.Regenerated), []string{
		"user: the first words", "assistant: the first words",
	})
	if res.ClosedView.Input || res.ClosedView.Send || res.ClosedView.Placeholder != "This session is closed." {
		t.Errorf("closed session's controls = %+v, want no input, saying it is closed", res.ClosedView)
	}
	if !res.Next.Input || !res.Next.Send || strings.Contains(res.Next.Placeholder, "closed") {
		t.Errorf("controls of the session opened after a closed one = %+v, want it to take input", res.Next)
	}
	d := res.Deleted
	if d.Input || d.Send || d.Fork || d.Close || d.Regenerate || !strings.Contains(d.Problem, "session_not_found") {
		t.Errorf("a deleted session's view = %+v, want every control off and the 404 shown", d)
	}
}

// TestConsole_Layout: at 1280 and at 390 px no control is clipped and
// nothing scrolls sideways, in the sidebar (with approval and unread
// badges), a session, its settings and the inbox; at 1280 the sessions list starts on the first
// screen; at 390 the conversation scrolls in its own box, follows the
// answer, and the message box stays on screen. KERNELD_SCREENSHOTS=DIR
// keeps the pictures taken at both widths.
func TestConsole_Layout(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	seedSessions(t, k, "A session whose name is far too long for the sidebar of the console to show in full")
	startRun(t, k, "gated", "A run that waits for two approvals, with a title longer than the sidebar")
	shots := os.Getenv("KERNELD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	res := b.play(t, k, "layout", "SHOTS="+shots)

	for name, m := range map[string]measures{
		"1280 px, no session": res.Wide.Home, "1280 px, a session": res.Wide.Session,
		"1280 px, settings": res.Wide.Settings, "1280 px, inbox": res.Wide.Inbox,
		"390 px, the list": res.Narrow.Home, "390 px, answering": res.Narrow.Streaming, "390 px, answered": res.Narrow.Session,
		"390 px, settings": res.Narrow.Settings, "390 px, inbox": res.Narrow.Inbox,
	} {
		for _, p := range m.Problems {
			t.Errorf("%s: %s", name, p)
		}
	}
	if top := res.Wide.Home.SessionsTop; top > res.Wide.Home.ViewportHeight/2 {
		t.Errorf("at 1280 px the sessions list starts at %d px of %d", top, res.Wide.Home.ViewportHeight)
	}
	for name, m := range map[string]measures{"answering": res.Narrow.Streaming, "answered": res.Narrow.Session} {
		if m.PageScrolls || !m.ConversationScrolls || !m.AtEnd || !m.ComposerOnScreen {
			t.Errorf("390 px, %s: %+v; want the conversation to scroll in its own box, at its end, with the message box on screen", name, m)
		}
	}
}

// TestConsole_ChildAndFailure: a child session is linked to its own
// view, and a failed run says why.
func TestConsole_ChildAndFailure(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "child")

	equal(t, "parent", kinds(res.Transcript), []string{"message", "message", "tool spawn_agent done", "subagent", "message"})
	equal(t, "child", messages(res.Child), []string{"user: ask the child", "assistant: ask the child"})
	equal(t, "failed run", kinds(res.Failed), []string{"message", "message", "run-end run-end-failed"})
	if got := res.Failed[len(res.Failed)-1].Text; !strings.Contains(got, "the model is overloaded") {
		t.Errorf("the failed run shows %q, want the model's error", got)
	}
}

func TestConsole_ApproveAndDeny(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "approve")

	if len(res.Args) != 2 || !strings.Contains(res.Args[0], `"key": "theme"`) || !strings.Contains(res.Args[1], `"key": "language"`) {
		t.Errorf("approval arguments shown = %q, want each call's arguments", res.Args)
	}
	equal(t, "conversation", kinds(res.Transcript), []string{
		"message", "message", "tool memory_set done", "tool memory_set error", "approval", "approval", "message",
	})
	runs, err := k.kernel.ListRuns(tenantContext(t), res.ID, kernel.PageRequest{Limit: 10})
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("runs = %+v, %v; want one", runs, err)
	}
	approvals, err := k.kernel.Approvals(tenantContext(t), res.ID, runs.Items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range approvals {
		got = append(got, a.ToolName+" "+a.State+" "+a.Reason)
	}
	equal(t, "approvals", got, []string{"memory_set approved ", "memory_set denied not that one"})
}

func TestConsole_Cancel(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	res := b.play(t, k, "cancel")

	if !strings.Contains(res.BusyProblem, "session_busy") || !strings.Contains(res.BusyProblem, "(409)") {
		t.Errorf("input sent while busy showed %q, want the 409 session_busy problem", res.BusyProblem)
	}
	runs, err := k.kernel.ListRuns(tenantContext(t), res.ID, kernel.PageRequest{Limit: 10})
	if err != nil || len(runs.Items) != 2 {
		t.Fatalf("runs = %+v, %v; want two (the busy input was refused)", runs, err)
	}
	for _, run := range runs.Items {
		if run.State != session.RunCancelled {
			t.Errorf("run %s state = %s, want cancelled", run.ID, run.State)
		}
	}
	equal(t, "conversation", kinds(res.Transcript), []string{"message", "message", "tool wait error", "run-end run-end-cancelled"})
	// The tab opened during the second run drew the first from the
	// snapshot (which holds messages, not how runs ended), then the second.
	equal(t, "conversation in a tab opened mid-run", kinds(res.Other), []string{
		"message", "message", "tool wait error",
		"message", "message", "tool wait error", "run-end run-end-cancelled",
	})
	equal(t, "messages in a tab opened mid-run", messages(res.Other), []string{
		"user: take your time", "assistant: Working on it.", "user: once more", "assistant: Working on it.",
	})
}

func TestConsole_ReloadMidRun(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	var env []string
	if *update {
		seedSessions(t, k, "Release notes for 0.3", "Trip to Lisbon in May")
		shot, err := filepath.Abs("../../docs/console.png")
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "SCREENSHOT="+shot)
	}
	res := b.play(t, k, "reload", env...)

	// Reloaded while the run waited for the approval: all that came
	// before was back, from the tab's saved conversation.
	equal(t, "conversation after the first reload", kinds(res.Restored), []string{
		"message", "reasoning", "message", "tool current_time done", "tool memory_set running", "approval",
	})
	// The second tab started from a snapshot, once; this tab resumed twice.
	if i := slices.Index(res.Streams[1:], "?snapshot=messages"); i >= 0 {
		res.Streams = slices.Delete(res.Streams, i+1, i+2)
	}
	wantResumes(t, res.Streams, 3)
	// Reloaded again mid-answer: every token once, nothing missing.
	equal(t, "conversation", messages(res.Transcript), []string{
		"user: blue", "assistant: I'll keep that in mind.", "assistant: " + pacedAnswer,
	})
	equal(t, "items", kinds(res.Transcript), []string{
		"message", "reasoning", "message", "tool current_time done", "tool memory_set done", "approval", "message",
	})
	equal(t, "items in a tab opened mid-run", kinds(res.Other), kinds(res.Transcript))
	equal(t, "conversation in a tab opened mid-run", messages(res.Other), messages(res.Transcript))
}

func TestConsole_RefusedRequestShowsDetail(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{APIKeys: map[string]string{"k-browser": "acme"}})
	res := b.play(t, k, "refused", "API_KEY=k-browser")

	for _, want := range []string{"(401)", "a valid API key is required", "unauthorized"} {
		if !strings.Contains(res.Problem, want) {
			t.Errorf("the refused request showed %q, want it to contain %q", res.Problem, want)
		}
	}
	equal(t, "conversation", messages(res.Transcript), []string{"user: with a key", "assistant: with a key"})
}

// TestConsole_ConnectionDropped: kerneld drops every connection while the
// run waits for an approval and again mid-answer, as a lost network or a
// restarted proxy would; the console reconnects by itself and the
// conversation holds every token once.
func TestConsole_ConnectionDropped(t *testing.T) {
	b := needBrowser(t)
	k := startKerneld(t, httpapi.Options{})
	drops := 0
	res := b.playSteps(t, k, "drop", func(step string) {
		if step == "drop" {
			drops++
			k.server.CloseClientConnections()
		}
	})

	if drops != 2 {
		t.Errorf("connections dropped %d times, want 2", drops)
	}
	wantResumes(t, res.Streams, 3)
	equal(t, "conversation", messages(res.Transcript), []string{
		"user: green", "assistant: I'll keep that in mind.", "assistant: " + pacedAnswer,
	})
	equal(t, "items", kinds(res.Transcript), []string{
		"message", "reasoning", "message", "tool current_time done", "tool memory_set done", "approval", "message",
	})
}
