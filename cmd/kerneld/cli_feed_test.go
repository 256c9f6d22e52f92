package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/client"
	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// TestCLI_SessionsWatch: "kerneld sessions --watch" prints the sessions
// there are, then each change as it happens: a session made and run
// elsewhere, titled, waiting for two approvals, then idle once they are
// decided; Ctrl-C ends it without an error.
func TestCLI_SessionsWatch(t *testing.T) {
	srv := httpapitest.New(t, httpapitest.Options{Feed: true, Kernel: kerneltest.Options{
		Agents: []string{kerneltest.Gated}, Titles: kernel.Titles{Enabled: true},
	}})
	c, err := client.New(srv.URL)
	require.NoError(t, err)
	ctx := t.Context()
	before, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "gated", Title: "made before"})
	require.NoError(t, err)

	watchCtx, stop := context.WithCancel(ctx)
	r := &cliRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cio := cliIO{getenv: env(map[string]string{"KERNELD_URL": srv.URL}), stdout: r.stdout, stderr: r.stderr}
	go func() { r.done <- runCLI(watchCtx, []string{"sessions", "--watch"}, cio) }()
	defer stop()
	q := regexp.QuoteMeta
	r.waitOutput(t, regexp.MustCompile(`(?m)^\S+  now\s+`+q(before.ID)+`  gated  idle  made before$`))

	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "gated"})
	require.NoError(t, err)
	run, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "save my settings please"})
	require.NoError(t, err)
	id := q(s.ID)
	r.waitOutput(t, regexp.MustCompile(`(?ms)^\S+  session\.created\s+`+id+`  gated  idle$`+
		`.*^\S+  approval\.requested\s+`+id+`  gated  waiting_input  \[2 to approve, 1 unread\]  save my settings please$`))

	var inbox client.InboxPage
	require.Eventually(t, func() bool { // the inbox can trail the feed by a moment
		inbox, err = c.Inbox(ctx, "", client.Page{})
		return err == nil && len(inbox.Data) == 2
	}, 30*time.Second, 10*time.Millisecond, "the inbox never listed both calls")
	for _, it := range inbox.Data {
		_, err := c.DecideApproval(ctx, s.ID, run.ID, it.ToolCallID, client.Decision{Decision: client.Approve})
		require.NoError(t, err)
	}
	r.waitOutput(t, regexp.MustCompile(`(?m)^\S+  run\.ended\s+`+id+`  gated  idle  \[2 unread\]  save my settings please$`))

	stop()
	require.NoError(t, r.wait(t), "Ctrl-C ends the watch")
}
