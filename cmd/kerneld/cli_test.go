package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/client"
	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// cliServer starts a kerneld API with the repository's echo agent, the
// test kernel's failing, slow and gated agents, and patientAgent.
func cliServer(t *testing.T) *httpapitest.Server {
	t.Helper()
	echo, err := os.ReadFile("../../configs/agents/echo.yaml")
	require.NoError(t, err)
	return httpapitest.New(t, httpapitest.Options{Kernel: kerneltest.Options{
		Agents: []string{string(echo), kerneltest.Failing, kerneltest.Slow, kerneltest.Gated, patientAgent},
	}})
}

// patientAgent's first answer waits, in the tool "wait", until its run is
// cancelled: however slow the machine, a Ctrl-C finds it answering. Input
// starting "again" gets the alphabet at once.
const patientAgent = `
name: patient
description: waits until cancelled, then answers
model:
  provider: scripted
  script: [{text: "a b c", tool_calls: [{name: wait}]}]
  replies: [{starts_with: "again", text: "a b c d e f g h i j k l m n o p q r s t u v w x y z"}]
tools: [wait]
`

// cliRun is one CLI command run in-process.
type cliRun struct {
	stdout, stderr *syncBuffer
	interrupts     chan os.Signal
	done           chan error
}

// startCLI runs `kerneld args...` against url in the background, its
// input piped.
func startCLI(t *testing.T, url string, stdin *os.File, args ...string) *cliRun {
	t.Helper()
	return startCLIIO(t, url, stdin, false, args...)
}

// startTerminal is startCLI as if stdin were a terminal: the command
// prompts on stderr.
func startTerminal(t *testing.T, url string, stdin *os.File, args ...string) *cliRun {
	t.Helper()
	return startCLIIO(t, url, stdin, true, args...)
}

func startCLIIO(t *testing.T, url string, stdin *os.File, interactive bool, args ...string) *cliRun {
	t.Helper()
	r := &cliRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, interrupts: make(chan os.Signal, 2), done: make(chan error, 1)}
	cio := cliIO{getenv: env(map[string]string{"KERNELD_URL": url}), stdin: stdin, stdout: r.stdout, stderr: r.stderr,
		interactive: interactive, interrupts: r.interrupts}
	go func() { r.done <- runCLI(t.Context(), args, cio) }()
	return r
}

// wait returns the command's error once it has ended.
func (r *cliRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("the command did not end; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		return nil
	}
}

// waitOutput waits until stdout matches re and returns the match.
func (r *cliRun) waitOutput(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	return r.waitFor(t, "stdout", r.stdout, re)
}

// waitPrompts waits until the command, on a terminal, has prompted for
// its n-th line: it is then reading stdin, not answering.
func (r *cliRun) waitPrompts(t *testing.T, n int) {
	t.Helper()
	r.waitFor(t, "stderr", r.stderr, regexp.MustCompile(`(?s)^(.*> ){`+strconv.Itoa(n)+`}$`))
}

// waitFor waits until out matches re and returns the match. The bound is
// generous: it only keeps a broken command from hanging the test, and a
// busy machine can be slow.
func (r *cliRun) waitFor(t *testing.T, name string, out *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case err := <-r.done:
			r.done <- err // for wait
			if m := re.FindStringSubmatch(out.String()); m != nil {
				return m
			}
			t.Fatalf("the command ended (%v) before %s matched %s\nstdout:\n%s\nstderr:\n%s", err, name, re, r.stdout, r.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("%s never matched %s\nstdout:\n%s\nstderr:\n%s", name, re, r.stdout, r.stderr)
	return nil
}

// cliOutput runs a command to its end and returns its stdout.
func cliOutput(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	r := startCLI(t, url, nil, args...)
	err := r.wait(t)
	return r.stdout.String(), err
}

// TestCLI_Binary runs the built kerneld as a user would: run, a failing
// run, and chat with its input piped in.
func TestCLI_Binary(t *testing.T) {
	srv := cliServer(t)
	bin := buildBinary(t)
	kerneld := func(stdin string, args ...string) (stdout, stderr string, code int) {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = append(os.Environ(), "KERNELD_URL="+srv.URL)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.String(), errOut.String(), exit.ExitCode()
		}
		require.NoError(t, err)
		return out.String(), errOut.String(), 0
	}

	out, errOut, code := kerneld("", "run", "echo", "hi")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "hi\n", out)
	assert.Contains(t, errOut, "session ")

	out, errOut, code = kerneld("", "run", "failing", "go")
	assert.Equal(t, 1, code)
	assert.Equal(t, "one two\n", out, "the answer up to the failure")
	assert.Contains(t, errOut, "run failed (model_error)")

	out, errOut, code = kerneld("hello\n\nhow are you\n", "chat", "echo")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "hello\nhow are you\n", out)

	out, errOut, code = kerneld("", "run", "--url", srv.URL+"/nowhere", "echo", "hi")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "route_not_found")
}

func TestCLI_RunJSON(t *testing.T) {
	srv := cliServer(t)
	out, err := cliOutput(t, srv.URL, "run", "--json", "echo", "hi")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Contains(t, lines[0], `"type":"RUN_STARTED"`)
	assert.Contains(t, lines[len(lines)-1], `"type":"RUN_FINISHED"`)
}

// TestCLI_ChatCtrlC: Ctrl-C cancels the answer being written and the
// chat goes on; Ctrl-C at the prompt exits. The chat runs as on a
// terminal, so that the test knows when it is at the prompt: a Ctrl-C
// sent as soon as the answer's last word is out may still find the run
// going, and cancel it instead of exiting. The first answer waits until
// cancelled (patientAgent): one that streams on its own could end before
// a Ctrl-C sent mid-answer arrives on a busy machine, and then the
// Ctrl-C, at the prompt, would end the chat.
func TestCLI_ChatCtrlC(t *testing.T) {
	srv := cliServer(t)
	r, input := startChat(t, srv.URL, "patient", true)
	r.waitOutput(t, regexp.MustCompile(`→ wait\(`))
	r.interrupts <- os.Interrupt
	r.waitOutput(t, regexp.MustCompile(`\(cancelled\)\n$`))

	r.waitPrompts(t, 2)
	_, err := input.WriteString("again\n")
	require.NoError(t, err)
	r.waitOutput(t, regexp.MustCompile(`(?s)\(cancelled\)\n.*z\n$`))
	r.waitPrompts(t, 3)
	r.interrupts <- os.Interrupt
	require.NoError(t, r.wait(t))

	sessionID := regexp.MustCompile(`session (\S+)`).FindStringSubmatch(r.stderr.String())[1]
	c, err := client.New(srv.URL)
	require.NoError(t, err)
	runs, err := c.ListRuns(t.Context(), sessionID, client.Page{})
	require.NoError(t, err)
	require.Len(t, runs.Data, 2)
	assert.Equal(t, client.RunSucceeded, runs.Data[0].State)
	assert.Equal(t, client.RunCancelled, runs.Data[1].State)
}

// startChat starts `kerneld chat AGENT` on a pipe and sends it "go".
func startChat(t *testing.T, url, agent string, terminal bool) (*cliRun, *os.File) {
	t.Helper()
	stdin, input := pipe(t)
	r := startCLIIO(t, url, stdin, terminal, "chat", agent)
	_, err := input.WriteString("go\n")
	require.NoError(t, err)
	return r, input
}

// pipe returns a pipe for a command's stdin, closed at the test's end.
func pipe(t *testing.T) (stdin, input *os.File) {
	t.Helper()
	stdin, input, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdin.Close(); _ = input.Close() })
	return stdin, input
}

// TestCLI_ChatQuitWhileCancelling: two Ctrl-C during an answer end the chat.
func TestCLI_ChatQuitWhileCancelling(t *testing.T) {
	srv := cliServer(t)
	r, _ := startChat(t, srv.URL, "slow", false)
	r.waitOutput(t, regexp.MustCompile(`a b`))
	r.interrupts <- os.Interrupt
	r.interrupts <- os.Interrupt
	require.NoError(t, r.wait(t))
}

// TestCLI_Approve answers a run's approvals from another command, as a
// person in a second terminal would.
func TestCLI_Approve(t *testing.T) {
	srv := cliServer(t)
	r := startCLI(t, srv.URL, nil, "run", "gated", "save")
	asks := regexp.MustCompile(`(?s)needs approval: kerneld approve (\S+) (\S+) (\S+) .*needs approval: kerneld approve \S+ \S+ (\S+) `)
	m := r.waitOutput(t, asks)
	session, run, first, second := m[1], m[2], m[3], m[4]

	out, err := cliOutput(t, srv.URL, "approve", session, run, first)
	require.NoError(t, err)
	assert.Equal(t, "approved memory_set (call "+first+")\n", out)
	// The approved call's result comes before the next decision is made;
	// decided together, either could be logged first.
	r.waitOutput(t, regexp.MustCompile(`  approved\n← memory_set: \{"ok":true\}\n`))
	out, err = cliOutput(t, srv.URL, "approve", session, run, second, "--deny", "not that one")
	require.NoError(t, err)
	assert.Equal(t, "denied memory_set (call "+second+")\n", out)
	_, err = cliOutput(t, srv.URL, "approve", session, run, second)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "approval_decided", p.Code)

	require.NoError(t, r.wait(t))
	assert.Contains(t, r.stdout.String(), "  approved\n← memory_set: {\"ok\":true}\n")
	assert.Contains(t, r.stdout.String(), "  denied: not that one\n← memory_set failed: denied: not that one\n")
	assert.True(t, strings.HasSuffix(r.stdout.String(), "Done.\n"), r.stdout.String())
}

func TestCLI_AgentsSessionsWatch(t *testing.T) {
	srv := cliServer(t)
	out, err := cliOutput(t, srv.URL, "agents")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^echo\s+true\s+Echoes your input`, out)

	c, err := client.New(srv.URL)
	require.NoError(t, err)
	s, err := c.CreateSession(t.Context(), client.CreateSessionRequest{Agent: "echo", Name: "mine"})
	require.NoError(t, err)
	out, err = cliOutput(t, srv.URL, "sessions")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^`+s.ID+`\s+echo\s+active\s+.*mine$`, out)
	out, err = cliOutput(t, srv.URL, "sessions", "get", s.ID)
	require.NoError(t, err)
	assert.Contains(t, out, `"id": "`+s.ID+`"`)

	w := startCLI(t, srv.URL, nil, "watch", s.ID)
	_, err = c.CreateRun(t.Context(), s.ID, client.CreateRunRequest{Input: "watched"})
	require.NoError(t, err)
	w.waitOutput(t, regexp.MustCompile(`> watched\nwatched\n$`))

	require.Eventually(t, func() bool {
		out, err = cliOutput(t, srv.URL, "sessions")
		return err == nil && regexp.MustCompile(`(?m)^`+s.ID+`\s+echo\s+completed\s+.*\s1\s+\S+$`).MatchString(out)
	}, 10*time.Second, 10*time.Millisecond, "the answer never counted unread: %s", out)
	out, err = cliOutput(t, srv.URL, "read", s.ID)
	require.NoError(t, err)
	assert.Regexp(t, `^`+s.ID+` read up to seq (\d+) of \d+, 0 unread\n$`, out)
	out, err = cliOutput(t, srv.URL, "state", s.ID, "--set", `{"step":1}`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"step":1}`, out)
	out, err = cliOutput(t, srv.URL, "state", s.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"step":1}`, out)

	out, err = cliOutput(t, srv.URL, "sessions", "rm", s.ID)
	require.NoError(t, err)
	assert.Equal(t, "deleted "+s.ID+"\n", out)
	require.NoError(t, w.wait(t), "watch ends with the session")
	assert.Contains(t, w.stderr.String(), "the session has ended")

	_, err = cliOutput(t, srv.URL, "sessions", "get", s.ID)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "session_not_found", p.Code)
	_, err = cliOutput(t, srv.URL, "run", "echo")
	assert.ErrorContains(t, err, "usage: kerneld run")
}

// TestRun_DispatchesCLI: main's run hands client commands to the CLI and
// everything else to the daemon, as before.
func TestRun_DispatchesCLI(t *testing.T) {
	srv := cliServer(t)
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := run(ctx, []string{"run", "echo", "hi"}, env(map[string]string{"KERNELD_URL": srv.URL}), &out, &errOut)
	require.NoError(t, err, errOut.String())
	assert.Equal(t, "hi\n", out.String())
	assert.True(t, isCLICommand([]string{"agents"}))
	assert.False(t, isCLICommand([]string{"-addr", ":0"}))
	assert.False(t, isCLICommand(nil))
}

// TestCLI_ClearAndInstructions: run --instructions gives the new session
// its own instructions, sessions instructions changes them, and clear
// empties the conversation in place, keeping the memory unless asked.
func TestCLI_ClearAndInstructions(t *testing.T) {
	srv := cliServer(t)
	r := startCLI(t, srv.URL, nil, "run", "echo", "hello", "--instructions", "Be brief.")
	require.NoError(t, r.wait(t), r.stderr.String())
	id := regexp.MustCompile(`session (\S+)`).FindStringSubmatch(r.stderr.String())[1]
	c, err := client.New(srv.URL)
	require.NoError(t, err)
	s, err := c.GetSession(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, "Be brief.", s.Instructions)
	_, err = c.PutMemory(t.Context(), id, "city", "Lyon")
	require.NoError(t, err)

	out, err := cliOutput(t, srv.URL, "clear", id)
	require.NoError(t, err)
	assert.Equal(t, "cleared "+id+" (memory kept)\n", out)
	page, err := c.ListMessages(t.Context(), id, client.Page{})
	require.NoError(t, err)
	require.Len(t, page.Data, 1, "the history starts at the clear entry")
	assert.Equal(t, "compaction", page.Data[0].Role)
	mem, err := c.ListMemory(t.Context(), id)
	require.NoError(t, err)
	assert.Len(t, mem, 1)
	out, err = cliOutput(t, srv.URL, "clear", id, "--memory")
	require.NoError(t, err)
	assert.Equal(t, "cleared "+id+" (memory cleared)\n", out)
	mem, err = c.ListMemory(t.Context(), id)
	require.NoError(t, err)
	assert.Empty(t, mem)

	out, err = cliOutput(t, srv.URL, "sessions", "instructions", id, "")
	require.NoError(t, err)
	assert.Equal(t, id+" has no instructions of its own\n", out)
	_, err = cliOutput(t, srv.URL, "clear", "nope")
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "session_not_found", p.Code)
}
