package kernel_test

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// onEveryStore runs test on a kernel over each store: memory, SQLite and,
// when the tests have the servers (see redistest and pgtest), Redis and
// PostgreSQL.
func onEveryStore(t *testing.T, test func(t *testing.T, k *kerneltest.Kernel, rec *recorder)) {
	onEveryStoreWith(t, kerneltest.Options{}, test)
}

// onEveryStoreWith is onEveryStore with the kernels built from opts, each
// over its own store.
func onEveryStoreWith(t *testing.T, opts kerneltest.Options, test func(t *testing.T, k *kerneltest.Kernel, rec *recorder)) {
	stores := []struct {
		name string
		open func(t *testing.T) kernel.Store
	}{
		{"memory", func(*testing.T) kernel.Store { return memory.New() }},
		{"sqlite", func(t *testing.T) kernel.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "kerneld.db")})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, st.Close()) })
			return st
		}},
		{"redis", func(t *testing.T) kernel.Store {
			srv := redistest.Use(t)
			st, err := redis.Open(t.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, st.Close()) })
			return st
		}},
		{"postgres", func(t *testing.T) kernel.Store {
			st, err := postgres.Open(t.Context(), postgres.Options{URL: pgtest.Schema(t)})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, st.Close()) })
			return st
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			o := opts
			o.Store = st.open(t)
			k, rec := newKernel(t, o)
			test(t, k, rec)
		})
	}
}

func TestKernel_ForkSession(t *testing.T) {
	onEveryStore(t, func(t *testing.T, k *kerneltest.Kernel, rec *recorder) {
		e := forkEnv{k: k, rec: rec, agui: newAGUILogs(t)}
		t.Run("at several positions", func(t *testing.T) { testForkPositions(t, e) })
		t.Run("edit and resend", func(t *testing.T) { testForkEditResend(t, e) })
		t.Run("regenerate", func(t *testing.T) { testRegenerate(t, e) })
		t.Run("a running session", func(t *testing.T) { testForkRunning(t, e) })
	})
}

// forkEnv is what the fork tests of one store share.
type forkEnv struct {
	k    *kerneltest.Kernel
	rec  *recorder
	agui *aguiLogs
}

// aguiLogs collects session logs to check with the AG-UI checker in one
// run, which is much faster than one run per log, when the test ends.
type aguiLogs struct {
	mu   sync.Mutex
	logs [][]session.Event
}

func newAGUILogs(t *testing.T) *aguiLogs {
	a := &aguiLogs{}
	t.Cleanup(func() {
		if len(a.logs) > 0 {
			aguitest.VerifyLogs(t, a.logs)
		}
	})
	return a
}

// check checks session id's log against kerneld's stream rules now and
// AG-UI's when the test ends, and returns it.
func (a *aguiLogs) check(tb testing.TB, k *kernel.Kernel, id string) []session.Event {
	tb.Helper()
	evs := logOf(tb, k, id)
	checkLog(tb, id, evs)
	a.mu.Lock()
	a.logs = append(a.logs, evs)
	a.mu.Unlock()
	return evs
}

// fork forks session id at position at (nil: the completed history).
func fork(tb testing.TB, k *kernel.Kernel, id string, at *int64) session.Session {
	tb.Helper()
	f, err := k.ForkSession(tb.Context(), id, kernel.ForkRequest{AtMessage: at})
	require.NoError(tb, err, "fork %s at %v", id, at)
	return f
}

func position(n int64) *int64 { return &n }

// requireForkOf checks that f is a fork of src keeping want, src's first
// messages: its record, its history, and a log that is one run holding
// one MESSAGES_SNAPSHOT of want, valid AG-UI from seq 1.
func requireForkOf(t *testing.T, e forkEnv, src, f session.Session, want []session.Message) {
	k := e.k.Kernel
	t.Helper()
	assert.Equal(t, src.ID, f.ForkedFrom)
	assert.Equal(t, int64(len(want)), f.ForkPosition)
	assert.Equal(t, src.Agent, f.Agent)
	assert.Equal(t, session.StateCompleted, f.State)
	assert.Empty(t, f.ActiveRunID)
	assert.Empty(t, f.ParentID, "a fork is a top-level session")
	assert.Equal(t, f.ID, f.RootID)

	evs := e.agui.check(t, k, f.ID)
	require.Equal(t, []session.EventType{session.EventRunStarted, session.EventMessagesSnapshot, session.EventRunFinished}, types(evs))
	runID := evs[0].RunID
	forkedFrom, _ := kerneldMeta(t, evs[0])["forkedFrom"].(map[string]any)
	assert.Equal(t, map[string]any{"sessionId": src.ID, "messagePosition": float64(len(want))}, forkedFrom)
	if len(want) > 0 {
		assert.Equal(t, want[len(want)-1].RunID, evs[0].Member("parentRunId"))
	}
	var snap struct {
		Messages []struct {
			ID      string  `json:"id"`
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(evs[1].Data, &snap))
	require.Len(t, snap.Messages, len(want))

	got := historyOf(t, k, f.ID)
	require.Len(t, got, len(want))
	for i, m := range got {
		w := want[i]
		assert.Equal(t, []any{w.ID, w.Position, w.Role, w.Content, w.ToolCalls, w.ToolCallID},
			[]any{m.ID, m.Position, m.Role, m.Content, m.ToolCalls, m.ToolCallID}, "message %d", i+1)
		assert.Equal(t, runID, m.RunID, "a copied message belongs to the fork's first run")
		assert.Equal(t, w.ID, snap.Messages[i].ID)
		assert.Equal(t, string(w.Role), snap.Messages[i].Role)
	}
	checkHistory(t, got)
	runs := allRuns(t, k, f.ID)
	require.Len(t, runs, 1)
	assert.Equal(t, session.RunSucceeded, runs[0].State)
	assert.Equal(t, []int64{1, 3}, []int64{runs[0].StartSeq, runs[0].EndSeq})
}

func testForkPositions(t *testing.T, e forkEnv) {
	k, rec := e.k, e.rec
	ctx := t.Context()
	src := mustSession(t, k.Kernel, "tooluser")
	runToEnd(t, k.Kernel, rec, src.ID, "first")
	runToEnd(t, k.Kernel, rec, src.ID, "second")
	_, err := k.PutMemory(ctx, src.ID, "color", json.RawMessage(`"blue"`))
	require.NoError(t, err)
	_, err = k.UpdateSession(ctx, src.ID, kernel.SessionUpdate{Metadata: map[string]*string{"user": new("alice")}})
	require.NoError(t, err)
	src, err = k.GetSession(ctx, src.ID)
	require.NoError(t, err)
	history := historyOf(t, k.Kernel, src.ID)
	require.Equal(t, []session.Role{"user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"}, roles(history))

	var forks []string
	for _, at := range []int64{0, 1, 3, 4, 8} {
		f := fork(t, k.Kernel, src.ID, position(at))
		requireForkOf(t, e, src, f, history[:at])
		forks = append(forks, f.ID)
	}
	all := fork(t, k.Kernel, src.ID, nil)
	requireForkOf(t, e, src, all, history)
	forks = append(forks, all.ID)

	t.Run("keeps the source's settings and a copy of its memory", func(t *testing.T) {
		assert.Equal(t, map[string]string{"user": "alice"}, all.Metadata)
		e, err := k.GetMemory(ctx, all.ID, "color")
		require.NoError(t, err)
		assert.JSONEq(t, `"blue"`, string(e.Value))
		_, err = k.PutMemory(ctx, all.ID, "color", json.RawMessage(`"red"`))
		require.NoError(t, err)
		e, err = k.GetMemory(ctx, src.ID, "color")
		require.NoError(t, err)
		assert.JSONEq(t, `"blue"`, string(e.Value), "the source's memory is its own")
	})
	t.Run("lists its forks", func(t *testing.T) {
		page, err := k.ListSessions(ctx, kernel.ListSessions{ForkedFrom: src.ID})
		require.NoError(t, err)
		var ids []string
		for _, s := range page.Items {
			ids = append([]string{s.ID}, ids...) // newest first
		}
		assert.Equal(t, forks, ids)
		theirs, err := k.ListSessions(kernel.WithTenant(ctx, "other"), kernel.ListSessions{ForkedFrom: src.ID})
		require.NoError(t, err)
		assert.Empty(t, theirs.Items, "another tenant's forks")
	})
	t.Run("a fork runs on from its history", func(t *testing.T) {
		f := fork(t, k.Kernel, src.ID, position(4))
		runToEnd(t, k.Kernel, rec, f.ID, "third")
		got := historyOf(t, k.Kernel, f.ID)
		assert.Equal(t, []session.Role{"user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"}, roles(got))
		assert.Equal(t, "third", got[4].Content)
		assert.Equal(t, int64(5), got[4].Position)
		e.agui.check(t, k.Kernel, f.ID)
		assert.Len(t, historyOf(t, k.Kernel, src.ID), 8, "the source is left as it was")
	})
	t.Run("refuses", func(t *testing.T) {
		tests := []struct {
			name string
			at   int64
			kind error
			code string
		}{
			{"a negative position", -1, errdefs.ErrInvalid, ""},
			{"past the last message", 9, errdefs.ErrUnprocessable, "message_not_found"},
			{"between a tool call and its result", 2, errdefs.ErrUnprocessable, "unanswered_tool_calls"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := k.ForkSession(ctx, src.ID, kernel.ForkRequest{AtMessage: position(tt.at)})
				require.ErrorIs(t, err, tt.kind)
				if tt.code != "" {
					assert.Equal(t, tt.code, string(errdefs.CodeOf(err)))
				}
			})
		}
		_, err := k.ForkSession(kernel.WithTenant(ctx, "other"), src.ID, kernel.ForkRequest{})
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})
}

// testForkEditResend edits the second input: fork at the message before
// it, then run the new text.
func testForkEditResend(t *testing.T, e forkEnv) {
	k, rec := e.k, e.rec
	src := mustSession(t, k.Kernel, "echo")
	runToEnd(t, k.Kernel, rec, src.ID, "one")
	runToEnd(t, k.Kernel, rec, src.ID, "two")
	edited := historyOf(t, k.Kernel, src.ID)[2]
	require.Equal(t, "two", edited.Content)

	f := fork(t, k.Kernel, src.ID, position(edited.Position-1))
	runToEnd(t, k.Kernel, rec, f.ID, "TWO")

	assert.Equal(t, []string{"one", "one", "TWO", "TWO"}, historyContents(historyOf(t, k.Kernel, f.ID)))
	assert.Equal(t, []string{"one", "one", "two", "two"}, historyContents(historyOf(t, k.Kernel, src.ID)))
	e.agui.check(t, k.Kernel, f.ID)
}

func testRegenerate(t *testing.T, e forkEnv) {
	k, rec := e.k, e.rec
	ctx := t.Context()
	src := mustSession(t, k.Kernel, "echo")
	first := runToEnd(t, k.Kernel, rec, src.ID, "one")
	second := runToEnd(t, k.Kernel, rec, src.ID, "two")

	f, run, err := k.Regenerate(ctx, src.ID, second.ID)
	require.NoError(t, err)
	assert.Equal(t, src.ID, f.ForkedFrom)
	assert.Equal(t, int64(2), f.ForkPosition)
	assert.Equal(t, f.ID, run.SessionID)
	assert.Equal(t, "two", run.Input)
	assert.NotEqual(t, session.RunQueued, run.State, "the run starts at once on the new fork")
	waitRun(t, k.Kernel, rec, f.ID, run.ID)
	assert.Equal(t, []string{"one", "one", "two", "two"}, historyContents(historyOf(t, k.Kernel, f.ID)))
	evs := e.agui.check(t, k.Kernel, f.ID)
	assert.Equal(t, session.EventMessagesSnapshot, evs[1].Type)

	f, run, err = k.Regenerate(ctx, src.ID, first.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(0), f.ForkPosition)
	waitRun(t, k.Kernel, rec, f.ID, run.ID)
	assert.Equal(t, []string{"one", "one"}, historyContents(historyOf(t, k.Kernel, f.ID)))
	e.agui.check(t, k.Kernel, f.ID)
	assert.Equal(t, []string{"one", "one", "two", "two"}, historyContents(historyOf(t, k.Kernel, src.ID)))

	snapshotRun := allRuns(t, k.Kernel, f.ID)[1] // oldest last
	_, _, err = k.Regenerate(ctx, f.ID, snapshotRun.ID)
	requireCode(t, err, errdefs.ErrConflict, "run_not_regenerable")
	_, _, err = k.Regenerate(ctx, src.ID, unknownID)
	requireCode(t, err, errdefs.ErrNotFound, "run_not_found")
}

// testForkRunning forks a session while its second run waits on a tool:
// only the first run's messages are history that can be forked.
func testForkRunning(t *testing.T, e forkEnv) {
	k := e.k
	src := mustSession(t, k.Kernel, "waiter")
	first := mustRun(t, k.Kernel, src.ID, "first")
	waitStarted(t, k.Wait)
	_, err := k.CancelRun(t.Context(), src.ID, first.ID)
	require.NoError(t, err)
	completed := historyOf(t, k.Kernel, src.ID)
	running := mustRun(t, k.Kernel, src.ID, "second")
	waitStarted(t, k.Wait)
	history := historyOf(t, k.Kernel, src.ID)
	require.Greater(t, len(history), len(completed)+1, "the running run's input and tool calls are in the history")

	f := fork(t, k.Kernel, src.ID, nil)
	requireForkOf(t, e, src, f, completed)

	input := int64(len(completed) + 1)
	_, err = k.ForkSession(t.Context(), src.ID, kernel.ForkRequest{AtMessage: position(input)})
	requireCode(t, err, errdefs.ErrConflict, "message_not_completed")
	_, err = k.CancelRun(t.Context(), src.ID, running.ID)
	require.NoError(t, err)
	f = fork(t, k.Kernel, src.ID, position(input))
	assert.Equal(t, input, f.ForkPosition, "once the run has ended its messages can be forked")
}

// waitStarted waits until a call of the wait tool has started.
func waitStarted(tb testing.TB, w *kerneltest.WaitTool) {
	tb.Helper()
	select {
	case <-w.Started():
	case <-time.After(waitTimeout):
		tb.Fatal("the wait tool was never called")
	}
}

// historyContents returns the contents of msgs.
func historyContents(msgs []session.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}
