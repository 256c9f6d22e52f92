package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/client"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClient starts a kerneld API and returns a client of it.
func newClient(t *testing.T, opts httpapitest.Options, copts ...client.Option) (*client.Client, *httpapitest.Server) {
	t.Helper()
	srv := httpapitest.New(t, opts)
	c, err := client.New(srv.URL, copts...)
	require.NoError(t, err)
	return c, srv
}

// fastRetry reconnects at once, so tests of cuts run quickly.
var fastRetry = client.FollowOptions{RetryDelay: time.Millisecond}

// collect reads a stream to its end.
func collect(t *testing.T, s *client.Stream) []client.Event {
	t.Helper()
	var evs []client.Event
	for ev, err := range s.All() {
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}

// assistantText joins the assistant's text deltas, by the role the
// stream sets on them (across its reconnects, in the tests of cuts).
func assistantText(evs []client.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == client.TextMessageContent && ev.Role == "assistant" {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}

// requireGapless checks that evs are the log's events first..first+n-1,
// each once, in order.
func requireGapless(t *testing.T, evs []client.Event, first int64) {
	t.Helper()
	for i, ev := range evs {
		require.Equal(t, first+int64(i), ev.Seq, "event %d (%s): want seq %d", i, ev.Type, first+int64(i))
	}
}

func TestAgents(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	agents, err := c.ListAgents(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, agents)
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name
	}
	assert.Contains(t, names, "echo")

	gated, err := c.GetAgent(ctx, "gated")
	require.NoError(t, err)
	assert.True(t, gated.Available)
	assert.Equal(t, "scripted", gated.Model.Provider)
	var approval bool
	for _, tool := range gated.Tools {
		approval = approval || (tool.Name == "memory_set" && tool.RequireApproval)
	}
	assert.True(t, approval, "memory_set needs approval: %+v", gated.Tools)

	_, err = c.GetAgent(ctx, "nobody")
	requireProblem(t, err, http.StatusNotFound, "agent_not_found")
}

// requireProblem checks that err is a *client.Problem with status and code.
func requireProblem(t *testing.T, err error, status int, code string) *client.Problem {
	t.Helper()
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	assert.Equal(t, status, p.Status)
	assert.Equal(t, code, p.Code)
	assert.NotEmpty(t, p.Detail)
	assert.Contains(t, err.Error(), code)
	return p
}

func TestSessions_CRUDAndPages(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	var ids []string
	for i := range 3 {
		s, err := c.CreateSession(ctx, client.CreateSessionRequest{
			Agent: "echo", Name: "s" + string(rune('0'+i)), Metadata: map[string]string{"team": "a"},
			Memory: map[string]json.RawMessage{"greeting": json.RawMessage(`"hi"`)},
		})
		require.NoError(t, err)
		assert.Equal(t, client.SessionActive, s.State)
		assert.Equal(t, "echo", s.Agent)
		ids = append(ids, s.ID)
	}

	page, err := c.ListSessions(ctx, client.ListSessionsOptions{Agent: "echo", Page: client.Page{Limit: 2}})
	require.NoError(t, err)
	require.Len(t, page.Data, 2)
	require.NotEmpty(t, page.NextCursor)
	assert.Equal(t, ids[2], page.Data[0].ID, "newest first")
	next, err := c.ListSessions(ctx, client.ListSessionsOptions{Agent: "echo", Page: client.Page{Limit: 2, Cursor: page.NextCursor}})
	require.NoError(t, err)
	require.Len(t, next.Data, 1)
	assert.Equal(t, ids[0], next.Data[0].ID)
	assert.Empty(t, next.NextCursor)

	name := "renamed"
	s, err := c.UpdateSession(ctx, ids[0], client.UpdateSessionRequest{Name: &name, Metadata: map[string]*string{"team": nil}})
	require.NoError(t, err)
	assert.Equal(t, "renamed", s.Name)
	assert.Empty(t, s.Metadata)
	got, err := c.GetSession(ctx, ids[0])
	require.NoError(t, err)
	assert.Equal(t, s.Name, got.Name)

	parent, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "parent"})
	require.NoError(t, err)
	child, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "parent", ParentID: parent.ID})
	require.NoError(t, err)
	children, err := c.ListChildren(ctx, parent.ID, client.Page{})
	require.NoError(t, err)
	require.Len(t, children.Data, 1)
	assert.Equal(t, child.ID, children.Data[0].ID)
	assert.Equal(t, parent.ID, children.Data[0].ParentID)

	err = c.DeleteSession(ctx, parent.ID, false)
	p := requireProblem(t, err, http.StatusConflict, "session_has_children")
	assert.Equal(t, 1, p.Children)
	require.NoError(t, c.DeleteSession(ctx, parent.ID, true))
	_, err = c.GetSession(ctx, child.ID)
	requireProblem(t, err, http.StatusNotFound, "session_not_found")

	_, err = c.ListSessions(ctx, client.ListSessionsOptions{State: "sleeping"})
	p = requireProblem(t, err, http.StatusBadRequest, "invalid_request")
	assert.Contains(t, p.Errors, "state")
}

func TestMemory(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)

	e, err := c.PutMemory(ctx, s.ID, "prefs/color", map[string]any{"name": "blue", "rgb": []int{0, 0, 255}})
	require.NoError(t, err)
	assert.Equal(t, "prefs/color", e.Key)
	assert.JSONEq(t, `{"name":"blue","rgb":[0,0,255]}`, string(e.Value))
	_, err = c.PutMemory(ctx, s.ID, "n", json.RawMessage(`42`))
	require.NoError(t, err)

	got, err := c.GetMemory(ctx, s.ID, "prefs/color")
	require.NoError(t, err)
	assert.JSONEq(t, string(e.Value), string(got.Value))
	all, err := c.ListMemory(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "n", all[0].Key)

	require.NoError(t, c.DeleteMemory(ctx, s.ID, "prefs/color"))
	_, err = c.GetMemory(ctx, s.ID, "prefs/color")
	requireProblem(t, err, http.StatusNotFound, "memory_key_not_found")
	_, err = c.PutMemory(ctx, s.ID, "bad key!", 1)
	requireProblem(t, err, http.StatusBadRequest, "invalid_request")
}

func TestRuns_ListGetMessagesEventPages(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	run, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "hello there", IdempotencyKey: "k1"})
	require.NoError(t, err)
	assert.Equal(t, "hello there", run.Input)
	assert.Equal(t, "k1", run.IdempotencyKey)

	follow, err := c.Follow(ctx, s.ID, client.FollowOptions{})
	require.NoError(t, err)
	defer follow.Close()
	var evs []client.Event
	for ev, err := range follow.All() {
		require.NoError(t, err)
		evs = append(evs, ev)
		if ev.Ends() {
			break
		}
	}
	assert.Equal(t, "hello there", assistantText(evs))
	assert.Equal(t, client.RunStarted, evs[0].Type)
	assert.Equal(t, run.ID, evs[0].RunID)
	assert.Equal(t, s.ID, evs[0].SessionID)
	last := evs[len(evs)-1]
	assert.Equal(t, client.RunFinished, last.Type)
	assert.Equal(t, "success", last.Outcome)
	requireGapless(t, evs, 1)

	again, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "hello there", IdempotencyKey: "k1"})
	require.NoError(t, err)
	assert.Equal(t, run.ID, again.ID, "the same key answers the same run")

	got := waitRun(t, c, s.ID, run.ID) // its record ends just after its last event is out
	assert.Equal(t, client.RunSucceeded, got.State)
	assert.Equal(t, int64(1), got.StartSeq)
	assert.Equal(t, last.Seq, got.EndSeq)
	require.NotNil(t, got.EndedAt)
	runs, err := c.ListRuns(ctx, s.ID, client.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, runs.Data, 1)
	assert.Equal(t, run.ID, runs.Data[0].ID)

	msgs, err := c.ListMessages(ctx, s.ID, client.Page{})
	require.NoError(t, err)
	require.Len(t, msgs.Data, 2)
	assert.Equal(t, "user", msgs.Data[0].Role)
	assert.Equal(t, "hello there", msgs.Data[1].Content)
	transcript, err := c.Transcript(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, transcript, 2)
	assert.Equal(t, msgs.Data[0].ID, transcript[0].ID)
	assert.Equal(t, "answer:"+msgs.Data[0].ID, transcript[1].ID)
	assert.Equal(t, "hello there", transcript[1].Parts[1]["text"])

	page, err := c.Events(ctx, s.ID, client.EventPageOptions{After: 1, Limit: 3})
	require.NoError(t, err)
	require.Len(t, page.Events, 3)
	requireGapless(t, page.Events, 2)
	assert.Equal(t, int64(4), page.NextAfter)
	assert.Equal(t, evs[1].Type, page.Events[0].Type, "the page and the stream carry the same event")
	assert.Equal(t, evs[1].MessageID, page.Events[0].MessageID)

	_, err = c.Events(ctx, s.ID, client.EventPageOptions{After: 999})
	p := requireProblem(t, err, http.StatusBadRequest, "cursor_ahead")
	assert.Equal(t, last.Seq, p.LastSeq)
	_, err = c.GetRun(ctx, s.ID, "nope")
	requireProblem(t, err, http.StatusNotFound, "run_not_found")
}

func TestStreamRun_CancelAndBusy(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "slow"})
	require.NoError(t, err)
	stream, err := c.StreamRun(ctx, s.ID, client.CreateRunRequest{Input: "go"}, client.FollowOptions{})
	require.NoError(t, err)
	defer stream.Close()
	require.NotEmpty(t, stream.RunID())

	_, err = c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "again"})
	p := requireProblem(t, err, http.StatusConflict, "session_busy")
	assert.Equal(t, stream.RunID(), p.ActiveRunID)

	var evs []client.Event
	for ev, err := range stream.All() {
		require.NoError(t, err)
		evs = append(evs, ev)
		if ev.Type == client.TextMessageContent && len(evs) == 6 {
			run, err := c.CancelRun(ctx, s.ID, stream.RunID())
			require.NoError(t, err)
			assert.Equal(t, client.RunCancelled, run.State)
		}
	}
	last := evs[len(evs)-1]
	assert.Equal(t, client.RunFinished, last.Type)
	assert.Equal(t, "cancelled", last.Outcome)
	assert.Equal(t, "cancelled", last.Reason)
	_, err = stream.Next()
	assert.ErrorIs(t, err, io.EOF)
}

func TestStreamRun_RunError(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "failing"})
	require.NoError(t, err)
	stream, err := c.StreamRun(ctx, s.ID, client.CreateRunRequest{Input: "go"}, client.FollowOptions{})
	require.NoError(t, err)
	evs := collect(t, stream)
	last := evs[len(evs)-1]
	assert.Equal(t, client.RunErrorType, last.Type)
	assert.Equal(t, "model_error", last.Code)
	assert.Contains(t, last.Message, "model overloaded")
}

// TestStreamRun_ResumesAfterCut cuts the run's stream mid-frame, twice:
// the client resumes from the session's stream and delivers every event
// of the run once, in order.
func TestStreamRun_ResumesAfterCut(t *testing.T) {
	cutter := &httpapitest.Cutter{AfterFrames: 5, Times: 2}
	c, _ := newClient(t, httpapitest.Options{Wrap: cutter.Wrap})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "slow"})
	require.NoError(t, err)
	stream, err := c.StreamRun(ctx, s.ID, client.CreateRunRequest{Input: "go"}, fastRetry)
	require.NoError(t, err)
	evs := collect(t, stream)

	assert.Equal(t, 2, cutter.Cuts())
	assert.Equal(t, 2, stream.Reconnects())
	requireGapless(t, evs, 1)
	assert.Equal(t, "a b c d e f g h i j k l m n o p q r s t u v w x y z", assistantText(evs))
	assert.Equal(t, client.RunFinished, evs[len(evs)-1].Type)
	// The run's record says it ended just after its last event is out.
	run := waitRun(t, c, s.ID, stream.RunID())
	assert.Equal(t, run.EndSeq, evs[len(evs)-1].Seq, "the stream ends with the run's last event")
}

// TestFollow_ResumesAfterCut follows a session across a cut and two runs,
// then sees the stream end when the session is deleted.
func TestFollow_ResumesAfterCut(t *testing.T) {
	cutter := &httpapitest.Cutter{AfterFrames: 8, Times: 1}
	c, _ := newClient(t, httpapitest.Options{Wrap: cutter.Wrap})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "slow"})
	require.NoError(t, err)
	_, err = c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "one"})
	require.NoError(t, err)
	stream, err := c.Follow(ctx, s.ID, fastRetry)
	require.NoError(t, err)
	defer stream.Close()

	var evs []client.Event
	runs := 0
	for ev, err := range stream.All() {
		require.NoError(t, err)
		evs = append(evs, ev)
		if !ev.Ends() {
			continue
		}
		if runs++; runs == 1 {
			_, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "two"})
			require.NoError(t, err)
			continue
		}
		require.NoError(t, c.DeleteSession(ctx, s.ID, false))
	}
	// Once after the cut, once to learn that the deleted session's
	// stream, which ended, has nothing more (204).
	assert.Equal(t, 1, cutter.Cuts())
	assert.Equal(t, 2, stream.Reconnects())
	requireGapless(t, evs, 1)
	assert.Equal(t, 2, runs)
	_, err = stream.Next()
	assert.ErrorIs(t, err, io.EOF, "a deleted session's stream ends")
}

// TestFollow_Snapshot: an idle session's snapshot comes inside a run of
// its own, marked Snapshot, all three events with the log's last seq;
// then the next run, live.
func TestFollow_Snapshot(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	first := collect(t, mustStreamRun(t, c, s.ID, "first answer"))
	last := first[len(first)-1].Seq

	stream, err := c.Follow(ctx, s.ID, client.FollowOptions{Snapshot: true})
	require.NoError(t, err)
	defer stream.Close()
	var got []string
	for range 3 {
		ev, err := stream.Next()
		require.NoError(t, err)
		assert.Equal(t, last, ev.Seq, "%s: the snapshot's seq is the log's last", ev.Type)
		assert.Equal(t, ev.Type != client.MessagesSnapshot, ev.Snapshot, "%s marked Snapshot", ev.Type)
		got = append(got, ev.Type)
		if msgs, ok := ev.Messages(); ok {
			require.Len(t, msgs, 2)
			assert.Equal(t, []string{"user: first answer", "assistant: first answer"},
				[]string{msgs[0].Role + ": " + msgs[0].Content, msgs[1].Role + ": " + msgs[1].Content})
			assert.Equal(t, first[0].RunID, msgs[1].RunID)
		}
	}
	assert.Equal(t, []string{client.RunStarted, client.MessagesSnapshot, client.RunFinished}, got)

	_, err = c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "second"})
	require.NoError(t, err)
	ev, err := stream.Next()
	require.NoError(t, err)
	assert.Equal(t, client.RunStarted, ev.Type)
	assert.False(t, ev.Snapshot)
	assert.Equal(t, last+1, ev.Seq)
}

// TestStream_AssistantText: the assistant's text alone, without the
// echoed input, with a line between two answers of one run; and the role
// on every event of a text message.
func TestStream_AssistantText(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	var text strings.Builder
	for delta, err := range mustStreamRun(t, c, s.ID, "hello there").AssistantText() {
		require.NoError(t, err)
		text.WriteString(delta)
	}
	assert.Equal(t, "hello there", text.String())

	tools, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "tooluser"})
	require.NoError(t, err)
	text.Reset()
	for delta, err := range mustStreamRun(t, c, tools.ID, "what time is it?").AssistantText() {
		require.NoError(t, err)
		text.WriteString(delta)
	}
	assert.Equal(t, "Checking the time.\nDone.", text.String())

	roles := map[string]int{}
	for _, ev := range collect(t, mustStreamRun(t, c, s.ID, "two words")) {
		switch ev.Type {
		case client.TextMessageStart, client.TextMessageContent, client.TextMessageEnd:
			roles[ev.Type+" "+ev.Role]++
		}
	}
	assert.Equal(t, map[string]int{
		"TEXT_MESSAGE_START user": 1, "TEXT_MESSAGE_CONTENT user": 1, "TEXT_MESSAGE_END user": 1,
		"TEXT_MESSAGE_START assistant": 1, "TEXT_MESSAGE_CONTENT assistant": 2, "TEXT_MESSAGE_END assistant": 1,
	}, roles)
}

func mustStreamRun(t *testing.T, c *client.Client, id, input string) *client.Stream {
	t.Helper()
	s, err := c.StreamRun(t.Context(), id, client.CreateRunRequest{Input: input}, client.FollowOptions{})
	require.NoError(t, err)
	return s
}

func TestApprovals(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "gated"})
	require.NoError(t, err)
	stream := mustStreamRun(t, c, s.ID, "save")
	var asked []string
	var evs []client.Event
	for ev, err := range stream.All() {
		require.NoError(t, err)
		evs = append(evs, ev)
		req, ok := ev.ApprovalRequest()
		if !ok {
			continue
		}
		assert.Equal(t, "memory_set", req.ToolName)
		asked = append(asked, req.ToolCallID)
		if len(asked) < 2 {
			continue
		}
		list, err := c.ListApprovals(ctx, s.ID, stream.RunID())
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "pending", list[0].State)
		assert.JSONEq(t, `{"key":"a","value":1}`, string(list[0].Arguments))
		a, err := c.DecideApproval(ctx, s.ID, stream.RunID(), asked[0], client.Decision{Decision: client.Approve})
		require.NoError(t, err)
		assert.Equal(t, "approved", a.State)
		a, err = c.DecideApproval(ctx, s.ID, stream.RunID(), asked[1], client.Decision{Decision: client.Deny, Reason: "not b"})
		require.NoError(t, err)
		assert.Equal(t, "denied", a.State)
		_, err = c.DecideApproval(ctx, s.ID, stream.RunID(), asked[1], client.Decision{Decision: client.Approve})
		requireProblem(t, err, http.StatusConflict, "approval_decided")
	}
	require.Len(t, asked, 2)
	assert.Equal(t, client.RunFinished, evs[len(evs)-1].Type)
	var results []string
	for _, ev := range evs {
		if ev.Type == client.ToolCallResult {
			results = append(results, ev.Content)
		}
	}
	assert.Contains(t, results, "denied: not b")
	mem, err := c.ListMemory(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, mem, 1, "only the approved call wrote")
	assert.Equal(t, "a", mem[0].Key)
}

func TestAPIKey(t *testing.T) {
	opts := httpapitest.Options{API: httpapi.Options{APIKeys: map[string]string{"secret": "acme"}}}
	c, srv := newClient(t, opts)
	_, err := c.ListAgents(t.Context())
	requireProblem(t, err, http.StatusUnauthorized, "unauthorized")
	_, err = c.Follow(t.Context(), "any", client.FollowOptions{})
	requireProblem(t, err, http.StatusUnauthorized, "unauthorized")

	keyed, err := client.New(srv.URL, client.WithAPIKey("secret"), client.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	s, err := keyed.CreateSession(t.Context(), client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	assert.Equal(t, "acme", s.Tenant)
	usage, err := keyed.Usage(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "acme", usage.Tenant)
	assert.Equal(t, int64(1), usage.Usage.Sessions)
}

func TestStream_CloseAndContext(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	s, err := c.CreateSession(t.Context(), client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)

	stream, err := c.Follow(t.Context(), s.ID, client.FollowOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := stream.Next()
		done <- err
	}()
	stream.Close()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, client.ErrStreamClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after Close")
	}

	ctx, cancel := context.WithCancel(t.Context())
	stream, err = c.Follow(ctx, s.ID, client.FollowOptions{})
	require.NoError(t, err)
	cancel()
	_, err = stream.Next()
	assert.True(t, errors.Is(err, context.Canceled), "got %v", err)

	_, err = c.Follow(t.Context(), "no-such-session", client.FollowOptions{})
	requireProblem(t, err, http.StatusNotFound, "session_not_found")
}

func TestNew_BadURL(t *testing.T) {
	_, err := client.New("ftp://example.com")
	require.Error(t, err)
}

// TestStreamRun_CutBeforeFirstEvent cuts a run's stream inside its
// RUN_STARTED, in a session with an earlier run: the client finds where
// the run starts, resumes there and delivers only this run's events.
func TestStreamRun_CutBeforeFirstEvent(t *testing.T) {
	cutter := &httpapitest.Cutter{AfterFrames: 1, Times: 1} // the retry line, then the cut
	c, _ := newClient(t, httpapitest.Options{Wrap: cutter.Wrap})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	earlier, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "first"})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for earlier.EndedAt == nil && time.Now().Before(deadline) { // JSON answers: not cut
		time.Sleep(5 * time.Millisecond)
		earlier, err = c.GetRun(ctx, s.ID, earlier.ID)
		require.NoError(t, err)
	}
	require.NotNil(t, earlier.EndedAt, "the first run did not end")

	stream, err := c.StreamRun(ctx, s.ID, client.CreateRunRequest{Input: "second"}, fastRetry)
	require.NoError(t, err)
	evs := collect(t, stream)
	assert.Equal(t, 1, cutter.Cuts())
	assert.Equal(t, 1, stream.Reconnects())
	requireGapless(t, evs, earlier.EndSeq+1)
	assert.Equal(t, client.RunStarted, evs[0].Type)
	for _, ev := range evs {
		require.Equal(t, stream.RunID(), ev.RunID)
	}
}

// waitRun polls until a run has ended.
func waitRun(t *testing.T, c *client.Client, id, runID string) client.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		run, err := c.GetRun(t.Context(), id, runID)
		require.NoError(t, err)
		if run.EndedAt != nil {
			return run
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", runID)
	return client.Run{}
}

// summarising compacts its history on request (as in httpapi's tests).
const summarising = `
name: summarising
model: {provider: scripted, script: [{text: "re: {input}"}], summary: "They counted."}
memory: {compaction: {at_messages: 100, keep_last: 2}}
`

func TestConversationControl(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{Kernel: kerneltest.Options{Agents: []string{kerneltest.Echo, summarising}}})
	ctx := t.Context()

	run, err := c.RunAgent(ctx, client.AgentRunRequest{Agent: "echo", Input: "one", SessionID: "my-session"})
	require.NoError(t, err)
	assert.Equal(t, "my-session", run.SessionID)
	waitRun(t, c, "my-session", run.ID)
	second, err := c.CreateRun(ctx, "my-session", client.CreateRunRequest{Input: "two"})
	require.NoError(t, err)
	waitRun(t, c, "my-session", second.ID)

	regen, err := c.RegenerateRun(ctx, "my-session", second.ID)
	require.NoError(t, err)
	assert.Equal(t, "two", regen.Run.Input)
	assert.Equal(t, regen.Session.ID, regen.Run.SessionID)
	require.NotNil(t, regen.Session.ForkedFrom)
	assert.Equal(t, "my-session", regen.Session.ForkedFrom.SessionID)
	assert.Equal(t, int64(2), regen.Session.ForkedFrom.MessagePosition)

	fork, err := c.ForkSession(ctx, "my-session", 0)
	require.NoError(t, err)
	msgs, err := c.ListMessages(ctx, fork.ID, client.Page{})
	require.NoError(t, err)
	assert.Len(t, msgs.Data, 4, "the whole history")

	closed, err := c.CloseSession(ctx, "my-session", "done here")
	require.NoError(t, err)
	assert.Equal(t, client.SessionClosed, closed.State)
	assert.Equal(t, "done here", closed.ClosedReason)
	_, err = c.CreateRun(ctx, "my-session", client.CreateRunRequest{Input: "three"})
	requireProblem(t, err, http.StatusConflict, "session_closed")

	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "summarising"})
	require.NoError(t, err)
	for _, in := range []string{"one", "two"} {
		r, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: in})
		require.NoError(t, err)
		waitRun(t, c, s.ID, r.ID)
	}
	compaction, err := c.CompactSession(ctx, s.ID)
	require.NoError(t, err)
	assert.Equal(t, client.RunSucceeded, compaction.Run.State)
	assert.Equal(t, "compaction", compaction.Run.Kind)
	require.NotNil(t, compaction.Summary)
	assert.Contains(t, compaction.Summary.Content, "They counted.")
}

// TestInboxAndAlways: the inbox lists a waiting call with where to decide
// it; "always" from the client decides it and the tool's other call, and
// the session shows the standing approval and its permission mode.
func TestInboxAndAlways(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "gated", PermissionMode: "read_only_auto"})
	require.NoError(t, err)
	assert.Equal(t, "read_only_auto", s.PermissionMode)
	_, err = c.CreateSession(ctx, client.CreateSessionRequest{Agent: "gated", PermissionMode: "auto"})
	requireProblem(t, err, http.StatusUnprocessableEntity, "permission_mode_not_allowed")
	run, err := c.CreateRun(ctx, s.ID, client.CreateRunRequest{Input: "save"})
	require.NoError(t, err)
	var inbox client.InboxPage
	require.Eventually(t, func() bool {
		inbox, err = c.Inbox(ctx, "gated", client.Page{})
		return err == nil && len(inbox.Data) == 2
	}, 10*time.Second, 5*time.Millisecond, "the inbox never showed the run's two calls")
	item := inbox.Data[0]
	assert.Equal(t, s.ID, item.SessionID)
	assert.Equal(t, run.ID, item.RunID)
	assert.Equal(t, "memory_set", item.ToolName)
	a, err := c.DecideApproval(ctx, item.SessionID, item.RunID, item.ToolCallID, client.Decision{Decision: client.Always})
	require.NoError(t, err)
	assert.Equal(t, "approved", a.State)
	require.Eventually(t, func() bool {
		r, err := c.GetRun(ctx, s.ID, run.ID)
		return err == nil && r.State == "succeeded"
	}, 10*time.Second, 5*time.Millisecond, "the other memory_set call needed no second decision")
	inbox, err = c.Inbox(ctx, "", client.Page{})
	require.NoError(t, err)
	assert.Empty(t, inbox.Data)
	got, err := c.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, got.AlwaysApproved, 1)
	assert.Equal(t, "memory_set", got.AlwaysApproved[0].ToolName)
	assert.Equal(t, item.ToolCallID, got.AlwaysApproved[0].ToolCallID)
}

// TestMarkRead reads a session as two users of one key: each has its own
// unread count, and an older seq never moves a cursor back.
func TestMarkRead(t *testing.T) {
	opts := httpapitest.Options{API: httpapi.Options{APIKeys: map[string]string{"k": "acme"}, UserHeader: true}}
	ann, srv := newClient(t, opts, client.WithAPIKey("k"), client.WithUser("ann"))
	bob, err := client.New(srv.URL, client.WithAPIKey("k"), client.WithUser("bob"))
	require.NoError(t, err)
	ctx := t.Context()
	s, err := ann.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	stream, err := ann.StreamRun(ctx, s.ID, client.CreateRunRequest{Input: "hello"}, client.FollowOptions{})
	require.NoError(t, err)
	evs := collect(t, stream)
	last := evs[len(evs)-1].Seq

	read, err := ann.MarkRead(ctx, s.ID, last)
	require.NoError(t, err)
	assert.Equal(t, last, read.ReadSeq)
	assert.Equal(t, 0, read.Unread)
	again, err := ann.MarkRead(ctx, s.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, last, again.ReadSeq, "an older seq leaves the cursor")
	other, err := bob.GetSession(ctx, s.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, other.Unread, "bob has not read the answer")
	all, err := bob.MarkRead(ctx, s.ID, 0)
	require.NoError(t, err)
	assert.Equal(t, 0, all.Unread)
}

func TestState(t *testing.T) {
	c, _ := newClient(t, httpapitest.Options{})
	ctx := t.Context()
	s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo"})
	require.NoError(t, err)
	got, err := c.GetState(ctx, s.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `null`, string(got))
	_, err = c.PutState(ctx, s.ID, map[string]any{"step": 1})
	require.NoError(t, err)
	got, err = c.GetState(ctx, s.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"step":1}`, string(got))
}
