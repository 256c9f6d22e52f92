package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
)

func TestKernel_Run(t *testing.T) {
	t.Run("tool call run", testRunToolCall)
	t.Run("200 concurrent sessions", testRunConcurrent)
	t.Run("model error", testRunModelError)
	t.Run("max turns", testRunMaxTurns)
	t.Run("tool errors go back to the model", testRunToolErrors)
	t.Run("run timeout", testRunTimeout)
	t.Run("tool timeout goes back to the model", testRunToolTimeout)
	t.Run("busy session", testRunBusy)
	t.Run("idempotency key", testRunIdempotency)
	t.Run("bad if_busy", testRunIfBusy)
	t.Run("invalid request", testRunInvalid)
	t.Run("unknown session", testRunUnknownSession)
	t.Run("accepts input right after RUN_FINISHED", testRunRightAfterEnd)
	t.Run("history window never starts with a tool result", testRunHistoryWindow)
	t.Run("store fails while starting", testRunStartFails)
	t.Run("store blips mid-run", testRunStoreBlips)
	t.Run("store fails mid-run for longer than the lease TTL", testRunStoreFailsMidRun)
}

// indexOf returns the index of the first event at or after from that
// matches, or -1.
func indexOf(evs []session.Event, from int, match func(session.Event) bool) int {
	for i := from; i < len(evs); i++ {
		if match(evs[i]) {
			return i
		}
	}
	return -1
}

func ofType(t session.EventType) func(session.Event) bool {
	return func(ev session.Event) bool { return ev.Type == t }
}

// textOf concatenates the deltas of a text message.
func textOf(evs []session.Event, messageID string) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == session.EventTextMessageContent && ev.Member("messageId") == messageID {
			b.WriteString(ev.Member("delta"))
		}
	}
	return b.String()
}

// count returns how many events have type typ.
func count(evs []session.Event, typ session.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func testRunToolCall(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "tooluser")
	const input = "What time is it?"
	run := mustRun(t, k.Kernel, s.ID, input)
	assert.Equal(t, session.RunRunning, run.State)
	assert.Equal(t, input, run.Input)
	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)

	evs := verifiedLog(t, k.Kernel, s.ID)
	assert.Equal(t, seqs(evs), seqs(rec.Events(s.ID)), "observed events differ from the log")

	// RUN_STARTED, then the input echoed as a user message.
	require.GreaterOrEqual(t, len(evs), 5)
	assert.Equal(t, session.EventRunStarted, evs[0].Type)
	assert.Equal(t, s.ID, evs[0].Member("threadId"))
	assert.Equal(t, run.ID, evs[0].Member("runId"))
	assert.Equal(t, session.ProtocolVersion, evs[0].Member("protocolVersion"))
	assert.Equal(t, []session.EventType{
		session.EventTextMessageStart, session.EventTextMessageContent, session.EventTextMessageEnd,
	}, types(evs[1:4]))
	userID := evs[1].Member("messageId")
	assert.Equal(t, "user", evs[1].Member("role"))
	assert.Equal(t, input, evs[2].Member("delta"))
	assert.Equal(t, userID, evs[3].Member("messageId"))

	// The first model turn: assistant text, then the tool call it makes.
	isAssistantStart := func(ev session.Event) bool {
		return ev.Type == session.EventTextMessageStart && ev.Member("role") == "assistant"
	}
	a1Start := indexOf(evs, 4, isAssistantStart)
	require.Positive(t, a1Start, "no assistant message")
	a1 := evs[a1Start].Member("messageId")
	assert.Equal(t, "Checking the time.", textOf(evs, a1))
	a1End := indexOf(evs, a1Start, func(ev session.Event) bool {
		return ev.Type == session.EventTextMessageEnd && ev.Member("messageId") == a1
	})
	require.Positive(t, a1End, "assistant message %s never ends", a1)

	tcStart := indexOf(evs, 0, ofType(session.EventToolCallStart))
	require.Positive(t, tcStart, "no TOOL_CALL_START")
	assert.Greater(t, tcStart, indexOf(evs, a1Start, ofType(session.EventTextMessageContent)),
		"the tool call starts before the assistant's text")
	tc := evs[tcStart].Member("toolCallId")
	assert.NotEmpty(t, tc)
	assert.Equal(t, "current_time", evs[tcStart].Member("toolCallName"))
	assert.Equal(t, a1, evs[tcStart].Member("parentMessageId"))
	tcEnd := indexOf(evs, tcStart, func(ev session.Event) bool {
		return ev.Type == session.EventToolCallEnd && ev.Member("toolCallId") == tc
	})
	require.Positive(t, tcEnd, "tool call %s never ends", tc)
	var args strings.Builder
	for _, ev := range evs[tcStart:tcEnd] {
		if ev.Type == session.EventToolCallArgs {
			assert.Equal(t, tc, ev.Member("toolCallId"))
			args.WriteString(ev.Member("delta"))
		}
	}
	assert.JSONEq(t, `{"timezone":"UTC"}`, args.String())

	// The tool's result, then the second model turn.
	res := indexOf(evs, 0, ofType(session.EventToolCallResult))
	require.Greater(t, res, max(tcEnd, a1End), "TOOL_CALL_RESULT must follow the ends of the call and the message")
	assert.Equal(t, tc, evs[res].Member("toolCallId"))
	assert.Equal(t, "tool", evs[res].Member("role"))
	assert.False(t, isErrorResult(t, evs[res]))
	var result map[string]string
	require.NoError(t, json.Unmarshal([]byte(evs[res].Member("content")), &result), "result %q", evs[res].Member("content"))
	assert.Equal(t, "UTC", result["timezone"])
	toolMsgID := evs[res].Member("messageId")

	a2Start := indexOf(evs, res, isAssistantStart)
	require.Positive(t, a2Start, "no second assistant message")
	a2 := evs[a2Start].Member("messageId")
	assert.NotEqual(t, a1, a2)
	assert.Equal(t, "Done.", textOf(evs, a2))
	assert.Equal(t, 1, count(evs, session.EventToolCallStart))
	assert.Equal(t, 1, count(evs, session.EventToolCallResult))
	assert.Equal(t, 3, count(evs, session.EventTextMessageStart))

	// RUN_FINISHED with the usage of both model calls.
	last := evs[len(evs)-1]
	require.Equal(t, session.EventRunFinished, last.Type)
	assert.Equal(t, "success", outcomeOf(last))
	assert.Equal(t, run.ID, last.Member("runId"))
	assert.Equal(t, s.ID, last.Member("threadId"))
	in, out := usageOf(t, last)
	assert.Positive(t, in)
	assert.Positive(t, out)

	// The run record and the session.
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Nil(t, got.Error)
	assert.Equal(t, session.Usage{InputTokens: int64(in), OutputTokens: int64(out)}, got.Usage)
	assert.Equal(t, evs[0].Seq, got.StartSeq)
	assert.Equal(t, last.Seq, got.EndSeq)
	assert.False(t, got.StartedAt.IsZero())
	assert.False(t, got.EndedAt.Before(got.StartedAt))
	sess, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StateCompleted, sess.State)
	assert.Empty(t, sess.ActiveRunID)
	assert.Equal(t, last.Seq, sess.LastSeq)

	// The history: user, assistant with the call, tool result, assistant.
	msgs := historyOf(t, k.Kernel, s.ID)
	require.Equal(t, []session.Role{session.RoleUser, session.RoleAssistant, session.RoleTool, session.RoleAssistant}, roles(msgs))
	checkHistory(t, msgs)
	assert.Equal(t, userID, msgs[0].ID)
	assert.Equal(t, input, msgs[0].Content)
	assert.Equal(t, a1, msgs[1].ID)
	assert.Equal(t, "Checking the time.", msgs[1].Content)
	require.Len(t, msgs[1].ToolCalls, 1)
	assert.Equal(t, tc, msgs[1].ToolCalls[0].ID)
	assert.Equal(t, "current_time", msgs[1].ToolCalls[0].Name)
	assert.JSONEq(t, `{"timezone":"UTC"}`, msgs[1].ToolCalls[0].Arguments)
	assert.Equal(t, toolMsgID, msgs[2].ID)
	assert.Equal(t, tc, msgs[2].ToolCallID)
	assert.False(t, msgs[2].IsError)
	assert.Equal(t, a2, msgs[3].ID)
	assert.Equal(t, "Done.", msgs[3].Content)
	for i, m := range msgs {
		assert.Equal(t, run.ID, m.RunID, "message %d", i)
		assert.Equal(t, int64(i+1), m.Position, "message %d", i)
	}
}

// seqs returns the seqs of evs.
func seqs(evs []session.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func testRunConcurrent(t *testing.T) {
	const n = 200
	k, rec := newKernel(t, kerneltest.Options{})
	sessions := make([]session.Session, n)
	runs := make([]session.Run, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			agent := "echo"
			if i%2 == 0 {
				agent = "slow"
			}
			s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: agent})
			if err != nil {
				errs[i] = err
				return
			}
			sessions[i] = s
			runs[i], _, errs[i] = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: fmt.Sprintf("hello from session %d", i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "session %d", i)
	}

	var lastStart, firstEnd time.Time
	for i := range n {
		s := sessions[i]
		got := waitRun(t, k.Kernel, rec, s.ID, runs[i].ID)
		assert.Equal(t, session.RunSucceeded, got.State, "session %d", i)
		if s.Agent == "slow" {
			if got.StartedAt.After(lastStart) {
				lastStart = got.StartedAt
			}
			if firstEnd.IsZero() || got.EndedAt.Before(firstEnd) {
				firstEnd = got.EndedAt
			}
		}
		evs := logOf(t, k.Kernel, s.ID)
		checkLog(t, s.ID, evs)
		assert.Equal(t, seqs(evs), seqs(rec.Events(s.ID)), "session %d: observed events differ from the log", i)
		msgs := historyOf(t, k.Kernel, s.ID)
		want := fmt.Sprintf("hello from session %d", i)
		if s.Agent == "slow" {
			want = "a b c d e f g h i j k l m n o p q r s t u v w x y z"
		}
		if assert.Len(t, msgs, 2, "session %d", i) {
			assert.Equal(t, want, msgs[1].Content, "session %d", i)
		}
		if i < 2 {
			aguitest.Verify(t, evs)
		}
	}
	assert.True(t, lastStart.Before(firstEnd),
		"the slow runs did not overlap: the last started at %v, the first ended at %v", lastStart, firstEnd)
}

func testRunModelError(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "failing")
	run := mustRun(t, k.Kernel, s.ID, "hi")
	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)

	evs := logOf(t, k.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	end := evs[len(evs)-1]
	require.Equal(t, session.EventRunError, end.Type)
	assert.Equal(t, "model_error", end.Member("code"))
	assert.Equal(t, "model overloaded", end.Member("message"))
	prev := evs[len(evs)-2]
	require.Equal(t, session.EventTextMessageEnd, prev.Type, "the assistant's text must be closed before RUN_ERROR")
	assert.Equal(t, "one two", textOf(evs, prev.Member("messageId")))

	assert.Equal(t, session.RunFailed, got.State)
	assert.Equal(t, &session.RunError{Code: "model_error", Message: "model overloaded"}, got.Error)
	assert.Equal(t, end.Seq, got.EndSeq)
	sess, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StateError, sess.State)
	assert.Empty(t, sess.ActiveRunID)
	checkHistory(t, historyOf(t, k.Kernel, s.ID))

	next := mustRun(t, k.Kernel, s.ID, "again")
	assert.Equal(t, session.RunRunning, next.State)
	assert.Equal(t, session.RunFailed, waitRun(t, k.Kernel, rec, s.ID, next.ID).State)
	verifiedLog(t, k.Kernel, s.ID)
}

func testRunMaxTurns(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "looper")
	run := mustRun(t, k.Kernel, s.ID, "loop")
	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)

	evs := verifiedLog(t, k.Kernel, s.ID)
	end := evs[len(evs)-1]
	require.Equal(t, session.EventRunError, end.Type)
	assert.Equal(t, "max_turns", end.Member("code"))
	assert.Equal(t, 4, count(evs, session.EventTextMessageStart), "the input and one answer per model call")
	assert.Equal(t, 3, count(evs, session.EventToolCallStart))
	assert.Equal(t, 3, count(evs, session.EventToolCallResult))
	for _, ev := range evs {
		if ev.Type == session.EventToolCallResult {
			assert.False(t, isErrorResult(t, ev), "result %s", ev.Data)
		}
	}
	assert.Equal(t, session.RunFailed, got.State)
	require.NotNil(t, got.Error)
	assert.Equal(t, "max_turns", got.Error.Code)

	msgs := historyOf(t, k.Kernel, s.ID)
	checkHistory(t, msgs)
	assert.Equal(t, []session.Role{
		session.RoleUser,
		session.RoleAssistant, session.RoleTool,
		session.RoleAssistant, session.RoleTool,
		session.RoleAssistant, session.RoleTool,
	}, roles(msgs))
	sess, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, session.StateError, sess.State)
}

func testRunToolErrors(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "clumsy")
	run := mustRun(t, k.Kernel, s.ID, "do things")
	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)

	evs := verifiedLog(t, k.Kernel, s.ID)
	names := map[string]string{} // tool call id → tool name
	results := map[string]session.Event{}
	for _, ev := range evs {
		switch ev.Type {
		case session.EventToolCallStart:
			names[ev.Member("toolCallId")] = ev.Member("toolCallName")
		case session.EventToolCallResult:
			results[names[ev.Member("toolCallId")]] = ev
		}
	}
	tests := []struct {
		tool, want string
	}{
		{"fail", "the disk is on fire"},
		{"forbidden_tool", "not available to this agent"},
		{"current_time", `unknown timezone "Nowhere/Else"`},
	}
	for _, tt := range tests {
		res, ok := results[tt.tool]
		if !assert.True(t, ok, "no result for %s", tt.tool) {
			continue
		}
		assert.True(t, isErrorResult(t, res), "%s: result is not marked as an error: %s", tt.tool, res.Data)
		assert.Contains(t, res.Member("content"), tt.want, "%s", tt.tool)
	}
	assert.Len(t, results, 3)

	end := evs[len(evs)-1]
	require.Equal(t, session.EventRunFinished, end.Type)
	assert.Equal(t, "success", outcomeOf(end))
	assert.Equal(t, session.RunSucceeded, got.State)
	msgs := historyOf(t, k.Kernel, s.ID)
	checkHistory(t, msgs)
	require.NotEmpty(t, msgs)
	assert.Equal(t, "Recovered.", msgs[len(msgs)-1].Content)
	for _, m := range msgs {
		if m.Role == session.RoleTool {
			assert.True(t, m.IsError, "tool message %s", m.Content)
		}
	}
}

func testRunTimeout(t *testing.T) {
	const slowest = `
name: slowest
description: answers too slowly for its run_timeout
model: {provider: scripted, token_delay: 20ms, script: [{text: "a b c d e f g h i j k l m n o p q r s t u v w x y z"}]}
limits: {run_timeout: 100ms}
`
	k, rec := newKernel(t, kerneltest.Options{Agents: []string{slowest}})
	s := mustSession(t, k.Kernel, "slowest")
	run := mustRun(t, k.Kernel, s.ID, "hi")
	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)

	evs := verifiedLog(t, k.Kernel, s.ID)
	end := evs[len(evs)-1]
	require.Equal(t, session.EventRunError, end.Type)
	assert.Equal(t, "timeout", end.Member("code"))
	assert.Equal(t, session.EventTextMessageEnd, evs[len(evs)-2].Type)
	assert.Equal(t, session.RunFailed, got.State)
	require.NotNil(t, got.Error)
	assert.Equal(t, "timeout", got.Error.Code)
	checkHistory(t, historyOf(t, k.Kernel, s.ID))
}

func testRunToolTimeout(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{Limits: kernel.Limits{ToolTimeout: 50 * time.Millisecond}})
	s := mustSession(t, k.Kernel, "waiter")
	run := mustRun(t, k.Kernel, s.ID, "wait")
	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)

	evs := verifiedLog(t, k.Kernel, s.ID)
	var timedOut int
	for _, ev := range evs {
		if ev.Type == session.EventToolCallResult && isErrorResult(t, ev) {
			timedOut++
			assert.Contains(t, ev.Member("content"), `"wait" timed out`)
		}
	}
	assert.Equal(t, 1, timedOut)
	assert.Equal(t, session.RunSucceeded, got.State)
	checkHistory(t, historyOf(t, k.Kernel, s.ID))
}

func testRunBusy(t *testing.T) {
	tests := []struct {
		name   string
		ifBusy kernel.BusyPolicy
	}{
		{"default policy", ""},
		{"reject", kernel.BusyReject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, rec := newKernel(t, kerneltest.Options{})
			s := mustSession(t, k.Kernel, "slow")
			first := mustRun(t, k.Kernel, s.ID, "first")

			_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "second", IfBusy: tt.ifBusy})
			requireCode(t, err, errdefs.ErrConflict, "session_busy")
			assert.Equal(t, first.ID, activeRunID(err))

			runs, err := k.ListRuns(t.Context(), s.ID, kernel.PageRequest{})
			require.NoError(t, err)
			assert.Len(t, runs.Items, 1)
			_, err = k.CancelRun(t.Context(), s.ID, first.ID)
			require.NoError(t, err)
			assert.Len(t, runEvents(rec.Events(s.ID), first.ID), len(rec.Events(s.ID)), "the rejected input logged events")
		})
	}
}

func testRunIfBusy(t *testing.T) {
	tests := []struct {
		ifBusy   kernel.BusyPolicy
		wantCode string
	}{
		{"wait", ""},
		{"QUEUE", ""},
	}
	k, _ := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "slow")
	first := mustRun(t, k.Kernel, s.ID, "first")
	for _, tt := range tests {
		t.Run(string(tt.ifBusy), func(t *testing.T) {
			_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "second", IfBusy: tt.ifBusy})
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			assert.Equal(t, tt.wantCode, string(errdefs.CodeOf(err)))
			if tt.wantCode == "" {
				ve, ok := errors.AsType[*errdefs.ValidationError](err)
				require.True(t, ok, "error %T %v", err, err)
				assert.Contains(t, ve.Problems, "if_busy")
			}
		})
	}
	_, err := k.CancelRun(t.Context(), s.ID, first.ID)
	require.NoError(t, err)
}

func testRunInvalid(t *testing.T) {
	tests := []struct {
		name  string
		req   kernel.RunRequest
		field string
	}{
		{"empty input", kernel.RunRequest{}, "input"},
		{"input too long", kernel.RunRequest{Input: strings.Repeat("x", 101)}, "input"},
		{"idempotency key too long", kernel.RunRequest{Input: "hi", IdempotencyKey: strings.Repeat("k", kernel.MaxIdempotencyKeyLen+1)}, "Idempotency-Key"},
	}
	k, rec := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxInputBytes: 100}})
	s := mustSession(t, k.Kernel, "echo")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := k.Run(t.Context(), s.ID, tt.req)
			ve, ok := errors.AsType[*errdefs.ValidationError](err)
			require.True(t, ok, "error %T %v", err, err)
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			assert.Contains(t, ve.Problems, tt.field)
		})
	}
	assert.Empty(t, rec.Events(s.ID))
	run := runToEnd(t, k.Kernel, rec, s.ID, strings.Repeat("x", 100))
	assert.Equal(t, session.RunSucceeded, run.State)
}

func testRunUnknownSession(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	tests := []struct {
		name string
		id   string
		ctx  func(t *testing.T) context.Context
	}{
		{"malformed id", "not-a-session", nil},
		{"unknown id", "0190b1c4-7f3e-7cc0-8000-000000000000", nil},
		{"other tenant", s.ID, func(t *testing.T) context.Context { return kernel.WithTenant(t.Context(), "other") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			_, _, err := k.Run(ctx, tt.id, kernel.RunRequest{Input: "hi"})
			requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		})
	}
}

// slowObserver takes a moment over each batch that holds an event of type
// typ, as an observer doing synchronous I/O (a log handler on a busy disk)
// may.
type slowObserver struct {
	delay time.Duration
	typ   session.EventType
}

func (o slowObserver) ObserveEvents(evs []session.Event) {
	if slices.ContainsFunc(evs, func(ev session.Event) bool { return ev.Type == o.typ }) {
		time.Sleep(o.delay)
	}
}

func (slowObserver) ObserveSessionEnded(string, int64) {}

// testRunRightAfterEnd posts input the moment a run's RUN_FINISHED is
// observed, as a chat client following the stream does. The run has ended
// by then, so the input must be accepted, not refused as session_busy. A
// second, slower observer widens the window between the end being
// observable and the kernel letting go of the run, which otherwise lasts
// only for the store writes that record the run's end.
func testRunRightAfterEnd(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{Observers: []kernel.Observer{slowObserver{delay: 2 * time.Millisecond, typ: session.EventRunFinished}}})
	s := mustSession(t, k.Kernel, "echo")
	run, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "turn 0"})
	require.NoError(t, err)
	for i := 1; i <= 20; i++ {
		rec.WaitRunEnd(t, s.ID, run.ID)
		run, _, err = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: fmt.Sprintf("turn %d", i)})
		require.NoError(t, err, "turn %d, posted right after the previous run's RUN_FINISHED", i)
	}
	waitRun(t, k.Kernel, rec, s.ID, run.ID)
}

// testRunHistoryWindow runs an agent whose history window is smaller than
// its conversation, so the window's start falls on a tool result. The model
// must still get a valid conversation: no tool result without its call.
func testRunHistoryWindow(t *testing.T) {
	model := recordingModel(t,
		step{Text: "Checking.", ToolCalls: []scriptedCall{{Name: "current_time"}}},
		step{Text: "Done."},
	)
	k, rec, _ := newSpecKernel(t, kernel.Limits{}, agents.Spec{
		Name: "forgetful", Provider: model, Tools: toolRefs("current_time"),
		Memory: agents.MemoryPolicy{MaxHistoryMessages: 3},
	})
	s := mustSession(t, k, "forgetful")
	for i := range 3 {
		run := runToEnd(t, k, rec, s.ID, fmt.Sprintf("question %d", i))
		require.Equal(t, session.RunSucceeded, run.State)
	}
	reqs := model.Requests()
	require.Len(t, reqs, 6)
	for i, req := range reqs {
		assert.LessOrEqual(t, len(req.Messages), 3, "request %d", i)
		assert.NoError(t, conversationProblem(req.Messages), "request %d: %v", i, msgRoles(req.Messages))
	}
}

// msgRoles returns the roles of a request's messages.
func msgRoles(msgs []llm.Message) []llm.Role {
	out := make([]llm.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// flakyStore is the memory store with an event log that can be made to
// fail: with errDiskFull, a failure it gives no reason to retry, or, with
// unavailable set, as a store that cannot take writes for now.
type flakyStore struct {
	*memory.Store
	failAppends atomic.Bool
	unavailable atomic.Bool
	refused     atomic.Int64 // appends failed
}

var errDiskFull = errors.New("disk full")

func (s *flakyStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if s.failAppends.Load() {
		s.refused.Add(1)
		if s.unavailable.Load() {
			return errdefs.Storage("the disk is full", errDiskFull)
		}
		return errDiskFull
	}
	return s.Store.AppendEvents(ctx, token, evs)
}

// StartRun fails as AppendEvents does: a run's start logs events.
func (s *flakyStore) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if s.failAppends.Load() {
		return s.AppendEvents(ctx, token, st.Events)
	}
	return s.Store.StartRun(ctx, token, st)
}

// testRunStartFails makes the store refuse the events that start a run.
// Run reports the failure, and nothing may claim the run is going on: not
// the run record, not the session.
func testRunStartFails(t *testing.T) {
	store := &flakyStore{Store: memory.New()}
	k, rec := newKernel(t, kerneltest.Options{Store: store})
	s := mustSession(t, k.Kernel, "echo")
	store.failAppends.Store(true)
	_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hi"})
	require.ErrorIs(t, err, errDiskFull)
	store.failAppends.Store(false)

	got, err := k.GetSession(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Empty(t, got.ActiveRunID, "the session names a run that never started")
	assert.NotEqual(t, session.StateRunning, got.State, "the session says it is running")
	runs, err := k.ListRuns(t.Context(), s.ID, kernel.PageRequest{})
	require.NoError(t, err)
	for _, r := range runs.Items {
		assert.True(t, r.State.Terminal(), "run %s that never started is left %s", r.ID, r.State)
	}

	run := runToEnd(t, k.Kernel, rec, s.ID, "again")
	assert.Equal(t, session.RunSucceeded, run.State)
	evs := logOf(t, k.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	checkHistory(t, historyOf(t, k.Kernel, s.ID))
}

// testRunStoreBlips makes the store unable to take a streaming run's
// events for a moment, well within the lease TTL: the run waits and goes
// on as if nothing happened, with no event lost or doubled and nothing
// made again.
func testRunStoreBlips(t *testing.T) {
	store := &flakyStore{Store: memory.New()}
	store.unavailable.Store(true)
	k, rec := newKernel(t, kerneltest.Options{Store: store})
	s := mustSession(t, k.Kernel, "slow")
	run := mustRun(t, k.Kernel, s.ID, "hi")
	rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 3)
	store.failAppends.Store(true)
	require.Eventually(t, func() bool { return store.refused.Load() >= 3 }, waitTimeout, time.Millisecond,
		"the run did not try its append again")
	store.failAppends.Store(false)

	got := waitRun(t, k.Kernel, rec, s.ID, run.ID)
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Zero(t, got.Resumes, "a blip within the lease TTL pauses the run; it is not continued")
	evs := logOf(t, k.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	assert.Empty(t, customEvents(evs, session.CustomRunResumed))
	assert.Equal(t, slowAnswer, lastAnswer(t, k.Kernel, s.ID))
	assert.Equal(t, len(rec.Events(s.ID)), len(evs), "observers saw each event once")
}

// testRunStoreFailsMidRun makes the store unable to take a streaming
// run's events for longer than the lease TTL. The run pauses: while it
// does, its record says it runs, the session refuses new runs and cancels
// 503 storage_unavailable and the kernel is not ready. Once the store
// takes writes again the run is continued from its last completed step,
// keeping every event acknowledged before, and ends with its whole
// answer.
func testRunStoreFailsMidRun(t *testing.T) {
	store := &flakyStore{Store: memory.New()}
	store.unavailable.Store(true)
	k, rec := newKernel(t, kerneltest.Options{Store: store, Replication: kernel.Replication{LeaseTTL: 200 * time.Millisecond}})
	s := mustSession(t, k.Kernel, "slow")
	run := mustRun(t, k.Kernel, s.ID, "hi")
	rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 5)
	store.failAppends.Store(true)
	require.Eventually(t, func() bool {
		_, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "next"})
		return errdefs.CodeOf(err) == errdefs.CodeStorageUnavailable
	}, waitTimeout, time.Millisecond, "the run did not pause")
	seen := rec.Events(s.ID)
	got, err := k.GetRun(t.Context(), s.ID, run.ID)
	require.NoError(t, err)
	assert.Equal(t, session.RunRunning, got.State, "the run was recorded %s while paused", got.State)
	for _, busy := range []kernel.BusyPolicy{kernel.BusyReject, kernel.BusyQueue, kernel.BusyInterrupt, kernel.BusySteer} {
		_, _, err = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "next", IfBusy: busy})
		assert.Equal(t, errdefs.CodeStorageUnavailable, errdefs.CodeOf(err), "a run posted with if_busy %s: %v", busy, err)
	}
	_, err = k.CancelRun(t.Context(), s.ID, run.ID)
	assert.Equal(t, errdefs.CodeStorageUnavailable, errdefs.CodeOf(err), "cancel: %v", err)
	assert.Equal(t, errdefs.CodeStoreUnavailable, errdefs.CodeOf(k.Ready(t.Context())))
	store.failAppends.Store(false)

	got = waitRun(t, k.Kernel, rec, s.ID, run.ID)
	assert.Equal(t, session.RunSucceeded, got.State)
	assert.Equal(t, 1, got.Resumes)
	assert.Zero(t, got.Crashes)
	require.NoError(t, k.Ready(t.Context()))
	evs := logOf(t, k.Kernel, s.ID)
	checkLog(t, s.ID, evs)
	aguitest.Verify(t, evs)
	require.GreaterOrEqual(t, len(evs), len(seen))
	for i, ev := range seen {
		assert.Equal(t, ev.Seq, evs[i].Seq, "event %d the observers saw", i)
		assert.Equal(t, ev.Type, evs[i].Type, "event %d the observers saw", i)
	}
	resumed := customEvents(evs, session.CustomRunResumed)
	require.Len(t, resumed, 1)
	assert.Equal(t, session.ResumeStoreOutage, customValue(t, resumed[0])["reason"])
	assert.Equal(t, session.EventRunFinished, evs[len(evs)-1].Type)
	assert.Equal(t, slowAnswer, lastAnswer(t, k.Kernel, s.ID))
	checkHistory(t, historyOf(t, k.Kernel, s.ID))

	next := runToEnd(t, k.Kernel, rec, s.ID, "again")
	assert.Equal(t, session.RunSucceeded, next.State)
	checkLog(t, s.ID, logOf(t, k.Kernel, s.ID))
}

// endGateStore holds the write that records a run's end until released,
// widening the moment between a run's terminal event being logged and its
// record saying it ended.
type endGateStore struct {
	kernel.Store
	reached chan struct{} // closed when the end's write arrives
	release chan struct{} // closed by the test to let it through
	once    sync.Once
}

func (s *endGateStore) UpdateRun(ctx context.Context, r session.Run) error {
	if r.State.Terminal() {
		s.once.Do(func() { close(s.reached) })
		<-s.release
	}
	return s.Store.UpdateRun(ctx, r)
}

// TestKernel_RunReadAfterItsEnd reads a run the moment its RUN_FINISHED is
// observed, as a client following the stream does, while the write that
// records the end on the run is held: the read waits for it and finds the
// run ended, never still running.
func TestKernel_RunReadAfterItsEnd(t *testing.T) {
	gate := &endGateStore{Store: memory.New(), reached: make(chan struct{}), release: make(chan struct{})}
	k, rec := newKernel(t, kerneltest.Options{Store: gate})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(gate.release) }) }) // before the kernel closes
	s := mustSession(t, k.Kernel, "echo")
	run, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hello"})
	require.NoError(t, err)
	rec.WaitRunEnd(t, s.ID, run.ID)
	select {
	case <-gate.reached:
	case <-time.After(waitTimeout):
		t.Fatal("the run's end was never recorded")
	}
	read := make(chan session.Run, 1)
	go func() {
		r, err := k.GetRun(context.Background(), s.ID, run.ID)
		assert.NoError(t, err)
		read <- r
	}()
	// Nothing says that the read is waiting, so give it a moment to answer
	// early, which it must not do while the end is unrecorded.
	select {
	case r := <-read:
		t.Fatalf("the run read %s before its end was recorded", r.State)
	case <-time.After(100 * time.Millisecond):
	}
	release.Do(func() { close(gate.release) })
	assert.Equal(t, session.RunSucceeded, (<-read).State)
}
