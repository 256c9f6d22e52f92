package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/client"
	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// TestCLI_ChatAnswersApprovals: chat asks about each call that needs
// approval, in order, and the next line typed answers it: "y" approves,
// "n" with a reason denies, anything else is asked again.
func TestCLI_ChatAnswersApprovals(t *testing.T) {
	srv := cliServer(t)
	stdin, input := pipe(t)
	r := startTerminal(t, srv.URL, stdin, "chat", "gated")
	_, err := input.WriteString("save\n")
	require.NoError(t, err)
	r.waitFor(t, "stderr", r.stderr, regexp.MustCompile(`approve memory_set\(\{"key":"a","value":1\}\)\? \[y/n/a\(lways\) \[reason\]\] $`))
	assert.NotContains(t, r.stdout.String(), "kerneld approve", "the chat asks, it does not send the person elsewhere")

	_, err = input.WriteString("maybe\n")
	require.NoError(t, err)
	r.waitFor(t, "stderr", r.stderr, regexp.MustCompile(`answer y/n/a\(lways\) \[reason\]\napprove memory_set\(\{"key":"a","value":1\}\)\? \[y/n/a\(lways\) \[reason\]\] $`))
	_, err = input.WriteString("y\n")
	require.NoError(t, err)
	r.waitFor(t, "stderr", r.stderr, regexp.MustCompile(`approve memory_set\(\{"key":"b","value":2\}\)\? \[y/n/a\(lways\) \[reason\]\] $`))
	_, err = input.WriteString("n not that one\n")
	require.NoError(t, err)
	r.waitOutput(t, regexp.MustCompile(`Done.\n$`))
	r.waitPrompts(t, 2)
	require.NoError(t, input.Close())
	require.NoError(t, r.wait(t))

	out := r.stdout.String()
	assert.Contains(t, out, "? memory_set({\"key\":\"a\",\"value\":1}) needs approval\n")
	assert.Contains(t, out, "  approved\n← memory_set: {\"ok\":true}\n")
	assert.Contains(t, out, "  denied: not that one\n← memory_set failed: denied: not that one\n")
}

// TestCLI_ChatAnswersAlways: "a" approves the tool for the rest of the
// session, so the run's other memory_set call is not asked about.
func TestCLI_ChatAnswersAlways(t *testing.T) {
	srv := cliServer(t)
	stdin, input := pipe(t)
	r := startTerminal(t, srv.URL, stdin, "chat", "gated")
	_, err := input.WriteString("save\n")
	require.NoError(t, err)
	r.waitFor(t, "stderr", r.stderr, regexp.MustCompile(`approve memory_set\(\{"key":"a","value":1\}\)\? \[y/n/a\(lways\) \[reason\]\] $`))
	_, err = input.WriteString("a\n")
	require.NoError(t, err)
	r.waitOutput(t, regexp.MustCompile(`Done.\n$`))
	require.NoError(t, input.Close())
	require.NoError(t, r.wait(t))
	assert.Equal(t, 2, strings.Count(r.stdout.String(), "← memory_set: {\"ok\":true}\n"), r.stdout.String())
}

// TestCLI_ChatApprovalDenied: the gated demo agent, denied from a chat
// whose input is piped, says it did not save the note.
func TestCLI_ChatApprovalDenied(t *testing.T) {
	gated, err := os.ReadFile("../../configs/agents/gated.yaml")
	require.NoError(t, err)
	srv := httpapitest.New(t, httpapitest.Options{Kernel: kerneltest.Options{Agents: []string{string(gated)}}})
	stdin, input := pipe(t)
	r := startCLI(t, srv.URL, stdin, "chat", "gated")
	_, err = input.WriteString("buy milk\nn\n")
	require.NoError(t, err)
	r.waitOutput(t, regexp.MustCompile(`Not saved: you denied it.\n$`))
	require.NoError(t, input.Close())
	require.NoError(t, r.wait(t))
	assert.Equal(t, "Saving your note.\n→ memory_set({\"key\":\"note\",\"value\":\"buy milk\"})\n? memory_set({\"key\":\"note\",\"value\":\"buy milk\"}) needs approval\n"+
		"  denied\n← memory_set failed: denied\nNot saved: you denied it.\n", r.stdout.String())
}

// TestCLI_ChatInputEndsWhileAsked: when the input ends before an answer,
// the chat ends, saying how to decide the calls that wait.
func TestCLI_ChatInputEndsWhileAsked(t *testing.T) {
	srv := cliServer(t)
	stdin, input := pipe(t)
	r := startCLI(t, srv.URL, stdin, "chat", "gated")
	_, err := input.WriteString("save\n")
	require.NoError(t, err)
	r.waitOutput(t, regexp.MustCompile(`(?s)needs approval\n.*needs approval\n`))
	require.NoError(t, input.Close())
	require.NoError(t, r.wait(t))
	m := regexp.MustCompile(`memory_set still waits for a decision: kerneld approve (\S+) (\S+) (\S+) \[--deny REASON\]`).
		FindAllStringSubmatch(r.stderr.String(), -1)
	require.Len(t, m, 2, r.stderr.String())

	c, err := client.New(srv.URL)
	require.NoError(t, err)
	a, err := c.DecideApproval(t.Context(), m[0][1], m[0][2], m[0][3], client.Decision{Decision: client.Approve})
	require.NoError(t, err, "the command given decides the call")
	assert.Equal(t, "approved", a.State)
}

// TestCLI_WatchSnapshot: watch --snapshot prints the conversation so far
// from the snapshot, tool calls and results included, then what follows.
func TestCLI_WatchSnapshot(t *testing.T) {
	srv := httpapitest.New(t, httpapitest.Options{})
	c, err := client.New(srv.URL)
	require.NoError(t, err)
	s, err := c.CreateSession(t.Context(), client.CreateSessionRequest{Agent: "tooluser"})
	require.NoError(t, err)
	stream, err := c.StreamRun(t.Context(), s.ID, client.CreateRunRequest{Input: "what time is it?"}, client.FollowOptions{})
	require.NoError(t, err)
	for _, err := range stream.All() {
		require.NoError(t, err)
	}
	w := startCLI(t, srv.URL, nil, "watch", "--snapshot", s.ID)
	w.waitOutput(t, regexp.MustCompile(`(?s)^> what time is it\?\nChecking the time.\n→ current_time\(\{"timezone":"UTC"\}\)\n← current_time: .+\nDone.\n$`))
	_, err = c.CreateRun(t.Context(), s.ID, client.CreateRunRequest{Input: "and now?"})
	require.NoError(t, err)
	// The second answer ends before the session goes: deleting it earlier
	// would cancel the run, and watch would print that instead.
	w.waitOutput(t, regexp.MustCompile(`(?s)Done.\n> and now\?\nChecking the time.\n.*Done.\n$`))
	require.NoError(t, c.DeleteSession(t.Context(), s.ID, false))
	require.NoError(t, w.wait(t))
	assert.True(t, strings.HasSuffix(w.stdout.String(), "Done.\n"), w.stdout.String())
}
