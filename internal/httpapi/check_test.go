package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// damagedStore is a memory store whose reads of the log can be damaged:
// what a disk or a hand-edited database could hand back.
type damagedStore struct {
	*memory.Store
	damage atomic.Pointer[func([]session.Event) []session.Event]
}

func (s *damagedStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]session.Event, error) {
	evs, err := s.Store.ReadEvents(ctx, id, after, limit)
	if f := s.damage.Load(); f != nil && err == nil {
		evs = (*f)(evs)
	}
	return evs, err
}

// crashRun writes by hand, into the store, what a process that died in
// the middle of a run leaves: the run recorded running, its RUN_STARTED,
// an assistant message still open and a tool call without a result, the
// session recorded running it.
func crashRun(t *testing.T, st *damagedStore, id string) string {
	t.Helper()
	ctx := t.Context()
	token, err := st.AcquireLease(ctx, id, "crashed", time.Minute)
	require.NoError(t, err)
	now := time.Now().UTC()
	run := session.Run{ID: session.NewID(), SessionID: id, State: session.RunRunning, Input: "crash", CreatedAt: now, StartedAt: now}
	require.NoError(t, st.CreateRun(ctx, run, session.RunConstraints{}))
	msg := session.NewMessageID()
	evs := []session.Event{
		session.RunStarted(id, run.ID),
		session.TextMessageStart(msg, session.RoleAssistant),
		session.TextMessageContent(msg, "Let me look"),
		session.ToolCallStart("call_1", "current_time", msg),
	}
	for i := range evs {
		evs[i].SessionID, evs[i].RunID, evs[i].Time = id, run.ID, now
	}
	require.NoError(t, st.AppendEvents(ctx, token, evs))
	run.StartSeq = evs[0].Seq
	require.NoError(t, st.UpdateRun(ctx, run))
	sess, err := st.GetSession(ctx, id)
	require.NoError(t, err)
	sess.State, sess.ActiveRunID = session.StateRunning, run.ID
	require.NoError(t, st.UpdateSession(ctx, sess))
	require.NoError(t, st.ReleaseLease(ctx, id, token))
	return run.ID
}

// problemKinds returns the kinds of a check's or repair's problems.
func problemKinds(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, p := range v.([]any) {
		out = append(out, p.(map[string]any)["kind"].(string))
	}
	slices.Sort(out)
	return out
}

// TestSession_CheckRepair damages a session's log by hand, as a crash
// would, checks it, repairs it dry, then for real, and checks it again.
func TestSession_CheckRepair(t *testing.T) {
	st := &damagedStore{Store: memory.New()}
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st}})
	id := ts.createSession(t, "echo")
	ts.waitRun(t, id, ts.startRun(t, id, "hi"))
	healthy := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/check", "")
	require.Equal(t, true, healthy["healthy"], "check of a sound session: %v", healthy)

	runID := crashRun(t, st, id)
	check := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/check", "")
	require.Equal(t, false, check["healthy"])
	require.Equal(t, []string{"dangling_tool_call", "run_without_end"}, problemKinds(t, check["problems"]))
	if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, ""); s["status"] != "stalled" && s["status"] != "running" {
		t.Errorf("status of the crashed session = %v, want running or stalled", s["status"])
	}

	before := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["last_seq"]
	dry := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/repair", `{"dry_run":true}`)
	actions := dry["actions"].([]any)
	require.Len(t, actions, 1, "dry run: %v", dry)
	require.Equal(t, "end_run", actions[0].(map[string]any)["kind"])
	require.Equal(t, runID, actions[0].(map[string]any)["run_id"])
	after := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	require.Equal(t, before, after["last_seq"], "a dry run changes nothing")
	require.Equal(t, "running", after["state"], "a dry run changes nothing")

	done := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/repair", `{"dry_run":false}`)
	require.Equal(t, false, done["dry_run"])
	require.Empty(t, done["remaining"])
	run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "")
	require.Equal(t, "interrupted", run["state"])
	require.Equal(t, "failed", run["status"])
	sess := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	require.Equal(t, "error", sess["state"])
	require.Equal(t, "failed", sess["status"])
	require.Equal(t, true, ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/check", "")["healthy"])
	// The repaired session runs again.
	ts.waitRun(t, id, ts.startRun(t, id, "again"))

	t.Run("Unrepairable", func(t *testing.T) {
		damage := func(evs []session.Event) []session.Event {
			if len(evs) < 6 {
				return evs
			}
			evs = slices.Clone(evs)
			evs[1].Data = []byte(`{"type":`)    // unparsable
			evs = append(evs[:3], evs[4:]...)   // a gap
			evs = slices.Insert(evs, 4, evs[2]) // a regression
			return evs
		}
		st.damage.Store(&damage)
		defer st.damage.Store(nil)
		check := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/check", "")
		require.Equal(t, []string{"seq_gap", "seq_regression", "unparsable_event"}, problemKinds(t, check["problems"]))
		dry := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/repair", `{"dry_run":true}`)
		require.Empty(t, dry["actions"])
		require.Equal(t, []string{"seq_gap", "seq_regression", "unparsable_event"}, problemKinds(t, dry["remaining"]))
	})
}

// TestSession_RepairRunning refuses to repair a session whose run
// executes, and requires dry_run.
func TestSession_RepairRunning(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "waiter")
	runID := ts.startRun(t, id, "hi")
	<-ts.kernel.Wait.Started()
	if d := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/check", ""); d["healthy"] != true {
		t.Errorf("check of a session running a run: %v, want healthy", d)
	}
	runErrorCases(t, ts, []errorCase{
		{name: "Running", method: "POST", path: "/sessions/" + id + "/repair", body: `{"dry_run":true}`,
			status: http.StatusConflict, code: "session_running"},
		{name: "NoDryRun", method: "POST", path: "/sessions/" + id + "/repair", body: `{}`,
			status: http.StatusBadRequest, code: "invalid_request", field: "dry_run"},
		{name: "UnknownSession", method: "GET", path: "/sessions/nope/check",
			status: http.StatusNotFound, code: "session_not_found"},
	})
	ts.kernel.Wait.Release()
	ts.waitRun(t, id, runID)
}

// TestSession_RepairQueued leaves a run queued by hand on an idle session
// that nobody drives, as a replica dying between queueing and telling the
// owner would: the session's status is queued, and repair starts the run.
func TestSession_RepairQueued(t *testing.T) {
	st := &damagedStore{Store: memory.New()}
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: st}})
	id := ts.createSession(t, "echo")
	ts.waitRun(t, id, ts.startRun(t, id, "hi"))
	run := session.Run{ID: session.NewID(), SessionID: id, State: session.RunQueued, Input: "later", CreatedAt: time.Now().UTC()}
	require.NoError(t, st.CreateRun(t.Context(), run, session.RunConstraints{}))

	list := ts.must(t, http.StatusOK, "GET", "/sessions", "")["data"].([]any)
	require.Equal(t, "queued", list[0].(map[string]any)["status"])
	require.Equal(t, "queued", ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+run.ID, "")["status"])
	dry := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/repair", `{"dry_run":true}`)
	require.Equal(t, "start_queued", dry["actions"].([]any)[0].(map[string]any)["kind"])
	ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/repair", `{"dry_run":false}`)
	require.Equal(t, "idle", ts.waitRun(t, id, run.ID)["status"])
	require.Equal(t, "idle", ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")["status"])
}
