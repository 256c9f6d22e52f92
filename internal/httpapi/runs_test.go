package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
)

func TestRuns_Create(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")

	res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hello there"}`)
	if res.status != http.StatusAccepted {
		t.Fatalf("status = %d %s, want 202", res.status, res.body)
	}
	run := res.json(t)
	runID, _ := run["id"].(string)
	if !session.ValidID(runID) || len(runID) != session.IDLen {
		t.Fatalf("id = %v, want a new kerneld id", run["id"])
	}
	if loc := res.header.Get("Location"); loc != "/sessions/"+id+"/runs/"+runID {
		t.Errorf("Location = %q, want /sessions/%s/runs/%s", loc, id, runID)
	}
	if res.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed = %q on a first request, want none", res.header.Get("Idempotent-Replayed"))
	}
	want := map[string]any{
		"session_id": id, "input": "hello there", "idempotency_key": nil, "error": nil,
		"start_seq": float64(1),
	}
	for k, v := range want {
		if fmt.Sprint(run[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, run[k], v)
		}
	}
	if s := run["state"]; s != "running" && s != "queued" {
		t.Errorf("state = %v, want running", s)
	}
	for _, k := range []string{"created_at", "started_at"} {
		if !isRFC3339UTC(run[k]) {
			t.Errorf("%s = %v, want an RFC 3339 UTC timestamp", k, run[k])
		}
	}

	done := ts.waitRun(t, id, runID)
	if done["state"] != "succeeded" || done["error"] != nil || !isRFC3339UTC(done["ended_at"]) {
		t.Errorf("ended run = %v, want succeeded with ended_at and no error", done)
	}
	usage, _ := done["usage"].(map[string]any)
	if usage["output_tokens"].(float64) <= 0 {
		t.Errorf("usage = %v, want output tokens counted", done["usage"])
	}
	if done["end_seq"].(float64) <= done["start_seq"].(float64) {
		t.Errorf("start_seq, end_seq = %v, %v, want end after start", done["start_seq"], done["end_seq"])
	}
	s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	if s["state"] != "completed" || s["active_run_id"] != nil || s["last_seq"] != done["end_seq"] {
		t.Errorf("session after run = state %v active_run_id %v last_seq %v, want completed, null, %v",
			s["state"], s["active_run_id"], s["last_seq"], done["end_seq"])
	}

	t.Run("RejectExplicit", func(t *testing.T) {
		r := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"again","if_busy":"reject"}`)
		ts.waitRun(t, id, r["id"].(string))
	})

	t.Run("ActiveRunID", func(t *testing.T) {
		slow := ts.createSession(t, "slow")
		r := ts.startRun(t, slow, "go")
		s := ts.must(t, http.StatusOK, "GET", "/sessions/"+slow, "")
		if s["active_run_id"] != r {
			t.Errorf("active_run_id = %v, want %s", s["active_run_id"], r)
		}
		ts.must(t, http.StatusOK, "POST", "/sessions/"+slow+"/runs/"+r+"/cancel", "")
	})
}

func TestRuns_CreateErrors(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	path := "/sessions/" + id + "/run"
	post := func(name, body string, status int, code, field, fieldHas string, header ...string) errorCase {
		return errorCase{name: name, method: "POST", path: path, body: body, header: header, status: status, code: code,
			field: field, fieldHas: fieldHas}
	}
	runErrorCases(t, ts, []errorCase{
		post("MissingInput", `{}`, 400, "invalid_request", "input", "required"),
		post("EmptyInput", `{"input":""}`, 400, "invalid_request", "input", "required"),
		post("InputNotString", `{"input":42}`, 400, "invalid_request", "input", "must be a string"),
		post("InputObject", `{"input":{"text":"hi"}}`, 400, "invalid_request", "input", "must be a string"),
		post("InputTooLong", `{"input":"`+strings.Repeat("i", 256<<10+1)+`"}`, 400, "invalid_request", "input", ""),
		post("UnknownField", `{"input":"hi","stream":true}`, 400, "invalid_request", "stream", "unknown field"),
		post("Malformed", `{"input":"hi"`, 400, "invalid_request", "", ""),
		post("TrailingData", `{"input":"hi"}[]`, 400, "invalid_request", "", ""),
		post("EmptyBody", ``, 400, "invalid_request", "", ""),
		post("IfBusyUnknown", `{"input":"hi","if_busy":"later"}`, 400, "invalid_request", "if_busy", ""),
		post("IfBusyNotString", `{"input":"hi","if_busy":1}`, 400, "invalid_request", "if_busy", "must be a string"),
		post("IdempotencyKeyTooLong", `{"input":"hi"}`, 400, "invalid_request", "Idempotency-Key", "255",
			"Idempotency-Key", strings.Repeat("k", 256)),
		{name: "SessionNotFound", method: "POST", path: "/sessions/" + uuid.Must(uuid.NewV7()).String() + "/run",
			body: `{"input":"hi"}`, status: 404, code: "session_not_found"},
		{name: "SessionMalformedID", method: "POST", path: "/sessions/x/run", body: `{"input":"hi"}`,
			status: 404, code: "session_not_found"},
	})

	t.Run("NoRunCreated", func(t *testing.T) {
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "")); len(ids) != 0 {
			t.Errorf("runs after rejected requests = %v, want none", ids)
		}
	})

	t.Run("IdempotencyKeyMaxLength", func(t *testing.T) {
		ts.waitRun(t, id, ts.must(t, http.StatusAccepted, "POST", path, `{"input":"hi"}`,
			"Idempotency-Key", strings.Repeat("k", 255))["id"].(string))
	})
}

func TestRuns_Busy(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "slow")
	runID := ts.startRun(t, id, "go")

	res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"me too"}`)
	p := wantProblem(t, res, http.StatusConflict, "session_busy")
	if p["active_run_id"] != runID {
		t.Errorf("active_run_id = %v, want %s", p["active_run_id"], runID)
	}
	res = ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"me too","if_busy":"reject"}`)
	wantProblem(t, res, http.StatusConflict, "session_busy")

	ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+runID+"/cancel", "")
	next := ts.startRun(t, id, "now")
	ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+next+"/cancel", "")
	if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "")); !slices.Equal(ids, []string{next, runID}) {
		t.Errorf("runs = %v, want [%s %s]", ids, next, runID)
	}
}

func TestRuns_Idempotency(t *testing.T) {
	ts := newServer(t, serverOptions{})

	t.Run("Replay", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		path := "/sessions/" + id + "/run"
		first := ts.do(t, "POST", path, `{"input":"once"}`, "Idempotency-Key", "key-1")
		if first.status != http.StatusAccepted || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first = %d %s replayed %q, want 202 not replayed", first.status, first.body, first.header.Get("Idempotent-Replayed"))
		}
		run := first.json(t)
		if run["idempotency_key"] != "key-1" {
			t.Errorf("idempotency_key = %v, want key-1", run["idempotency_key"])
		}
		ts.waitRun(t, id, run["id"].(string))

		reused := wantProblem(t, ts.do(t, "POST", path, `{"input":"a different input"}`, "Idempotency-Key", "key-1"),
			http.StatusUnprocessableEntity, "idempotency_key_reused")
		if reused["run_id"] != run["id"] {
			t.Errorf("run_id = %v, want the key's run %v", reused["run_id"], run["id"])
		}
		for _, body := range []string{`{"input":"once"}`} {
			again := ts.do(t, "POST", path, body, "Idempotency-Key", "key-1")
			if again.status != http.StatusAccepted {
				t.Fatalf("replay = %d %s, want 202", again.status, again.body)
			}
			if got := again.header.Get("Idempotent-Replayed"); got != "true" {
				t.Errorf("Idempotent-Replayed = %q, want true", got)
			}
			if loc := again.header.Get("Location"); loc != first.header.Get("Location") {
				t.Errorf("replay Location = %q, want %q", loc, first.header.Get("Location"))
			}
			replayed := again.json(t)
			if replayed["id"] != run["id"] || replayed["input"] != "once" {
				t.Errorf("replay = %v, want the original run %v", replayed, run["id"])
			}
		}
		if ids := listIDs(t, ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "")); len(ids) != 1 {
			t.Errorf("runs = %v, want exactly one", ids)
		}

		other := ts.must(t, http.StatusAccepted, "POST", path, `{"input":"twice"}`, "Idempotency-Key", "key-2")
		if other["id"] == run["id"] {
			t.Error("a new key returned the old run")
		}
		ts.waitRun(t, id, other["id"].(string))
	})

	t.Run("ReplayWhileRunning", func(t *testing.T) {
		id := ts.createSession(t, "slow")
		path := "/sessions/" + id + "/run"
		run := ts.must(t, http.StatusAccepted, "POST", path, `{"input":"go"}`, "Idempotency-Key", "k")
		again := ts.do(t, "POST", path, `{"input":"go"}`, "Idempotency-Key", "k")
		if again.status != http.StatusAccepted || again.json(t)["id"] != run["id"] {
			t.Fatalf("replay while running = %d %s, want 202 with run %v", again.status, again.body, run["id"])
		}
		ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+run["id"].(string)+"/cancel", "")
	})

	t.Run("PerSession", func(t *testing.T) {
		a, b := ts.createSession(t, "echo"), ts.createSession(t, "echo")
		ra := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+a+"/run", `{"input":"x"}`, "Idempotency-Key", "shared")
		rb := ts.do(t, "POST", "/sessions/"+b+"/run", `{"input":"x"}`, "Idempotency-Key", "shared")
		if rb.status != http.StatusAccepted || rb.header.Get("Idempotent-Replayed") != "" || rb.json(t)["id"] == ra["id"] {
			t.Errorf("same key on another session = %d %s replayed %q, want a new run", rb.status, rb.body, rb.header.Get("Idempotent-Replayed"))
		}
		ts.waitRun(t, a, ra["id"].(string))
		ts.waitRun(t, b, rb.json(t)["id"].(string))
	})
}

func TestRuns_SessionClosed(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	if _, err := ts.kernel.CloseSession(kctx(t), id); err != nil {
		t.Fatal(err)
	}
	res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`)
	wantProblem(t, res, http.StatusConflict, "session_closed")
}

func TestRuns_ShuttingDown(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := ts.kernel.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`), http.StatusServiceUnavailable, "shutting_down")
	wantProblem(t, ts.do(t, "GET", "/readyz", ""), http.StatusServiceUnavailable, "shutting_down")
	ts.must(t, http.StatusOK, "GET", "/healthz", "")
}

func TestRuns_ListAndGet(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	var runs []string // newest first
	for i := range 5 {
		r := ts.startRun(t, id, fmt.Sprintf("input %d", i))
		ts.waitRun(t, id, r)
		runs = slices.Insert(runs, 0, r)
	}

	page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs", "")
	if ids := listIDs(t, page); !slices.Equal(ids, runs) || page["next_cursor"] != nil {
		t.Errorf("runs = %v next %v, want %v newest first and no next page", ids, page["next_cursor"], runs)
	}
	for _, limit := range []int{1, 2, 5} {
		if ids, _ := walkPages(t, ts, "/sessions/"+id+"/runs", limit); !slices.Equal(ids, runs) {
			t.Errorf("limit %d: runs = %v, want %v", limit, ids, runs)
		}
	}

	got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runs[4], "")
	if got["id"] != runs[4] || got["session_id"] != id || got["input"] != "input 0" || got["state"] != "succeeded" {
		t.Errorf("run = %v, want the first run, succeeded", got)
	}

	other := ts.createSession(t, "echo")
	otherRun := ts.startRun(t, other, "elsewhere")
	ts.waitRun(t, other, otherRun)
	unknown := uuid.Must(uuid.NewV7()).String()
	runErrorCases(t, ts, []errorCase{
		{name: "GetUnknownRun", method: "GET", path: "/sessions/" + id + "/runs/" + unknown, status: 404, code: "run_not_found"},
		{name: "GetMalformedRunID", method: "GET", path: "/sessions/" + id + "/runs/run-1", status: 404, code: "run_not_found"},
		{name: "GetRunOfAnotherSession", method: "GET", path: "/sessions/" + id + "/runs/" + otherRun, status: 404, code: "run_not_found"},
		{name: "GetUnknownSession", method: "GET", path: "/sessions/" + unknown + "/runs/" + runs[0], status: 404, code: "session_not_found"},
		{name: "ListUnknownSession", method: "GET", path: "/sessions/" + unknown + "/runs", status: 404, code: "session_not_found"},
		{name: "ListMalformedSession", method: "GET", path: "/sessions/-/runs", status: 404, code: "session_not_found"},
		{name: "ListLimitZero", method: "GET", path: "/sessions/" + id + "/runs?limit=0", status: 400, code: "invalid_request", field: "limit"},
		{name: "ListLimitTooLarge", method: "GET", path: "/sessions/" + id + "/runs?limit=201", status: 400, code: "invalid_request", field: "limit"},
		{name: "ListLimitNotNumber", method: "GET", path: "/sessions/" + id + "/runs?limit=ten", status: 400, code: "invalid_request", field: "limit"},
		{name: "ListBadCursor", method: "GET", path: "/sessions/" + id + "/runs?cursor=abc", status: 400, code: "invalid_request", field: "cursor"},
		{name: "CancelUnknownRun", method: "POST", path: "/sessions/" + id + "/runs/" + unknown + "/cancel", status: 404, code: "run_not_found"},
		{name: "CancelMalformedRunID", method: "POST", path: "/sessions/" + id + "/runs/x/cancel", status: 404, code: "run_not_found"},
		{name: "CancelRunOfAnotherSession", method: "POST", path: "/sessions/" + id + "/runs/" + otherRun + "/cancel", status: 404, code: "run_not_found"},
		{name: "CancelUnknownSession", method: "POST", path: "/sessions/" + unknown + "/runs/" + runs[0] + "/cancel", status: 404, code: "session_not_found"},
	})
}

func TestRuns_Cancel(t *testing.T) {
	ts := newServer(t, serverOptions{})

	t.Run("Running", func(t *testing.T) {
		id := ts.createSession(t, "slow")
		runID := ts.startRun(t, id, "go")
		waitRunning(t, ts, id)
		path := "/sessions/" + id + "/runs/" + runID + "/cancel"

		res := ts.do(t, "POST", path, "")
		if res.status != http.StatusOK {
			t.Fatalf("cancel = %d %s, want 200", res.status, res.body)
		}
		run := res.json(t)
		if run["state"] != "cancelled" || !isRFC3339UTC(run["ended_at"]) || run["end_seq"] == nil {
			t.Errorf("cancelled run = %v, want state cancelled with ended_at and end_seq", run)
		}
		again := ts.must(t, http.StatusOK, "POST", path, "")
		if fmt.Sprint(again) != fmt.Sprint(run) {
			t.Errorf("second cancel = %v, want the same run %v", again, run)
		}
		if got := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, ""); fmt.Sprint(got) != fmt.Sprint(run) {
			t.Errorf("GET after cancel = %v, want %v", got, run)
		}
		s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
		if s["active_run_id"] != nil || s["state"] == "running" {
			t.Errorf("session after cancel = state %v active_run_id %v, want not running", s["state"], s["active_run_id"])
		}
		next := ts.startRun(t, id, "again")
		ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+next+"/cancel", "")
	})

	t.Run("Finished", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		runID := ts.startRun(t, id, "hi")
		done := ts.waitRun(t, id, runID)
		got := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+runID+"/cancel", "")
		if fmt.Sprint(got) != fmt.Sprint(done) {
			t.Errorf("cancel of a finished run = %v, want it unchanged %v", got, done)
		}
	})

	t.Run("Failed", func(t *testing.T) {
		id := ts.createSession(t, "failing")
		done := ts.waitRun(t, id, ts.startRun(t, id, "hi"))
		if done["state"] != "failed" {
			t.Fatalf("state = %v, want failed", done["state"])
		}
		runErr, _ := done["error"].(map[string]any)
		if runErr["code"] != "model_error" || runErr["message"] != "model overloaded" {
			t.Errorf("error = %v, want model_error: model overloaded", done["error"])
		}
		got := ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+done["id"].(string)+"/cancel", "")
		if got["state"] != "failed" {
			t.Errorf("cancel of a failed run: state = %v, want failed", got["state"])
		}
		if s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, ""); s["state"] != "error" {
			t.Errorf("session state = %v, want error", s["state"])
		}
	})
}

func TestMessages_List(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	runID := ts.startRun(t, id, "what time is it?")
	ts.waitRun(t, id, runID)

	page := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/messages", "")
	data := page["data"].([]any)
	if len(data) != 4 || page["next_cursor"] != nil {
		t.Fatalf("messages = %v, want 4 on one page", page)
	}
	msg := func(i int) map[string]any { return data[i].(map[string]any) }
	roles := make([]any, len(data))
	for i := range data {
		roles[i] = msg(i)["role"]
		if msg(i)["run_id"] != runID {
			t.Errorf("messages[%d].run_id = %v, want %s", i, msg(i)["run_id"], runID)
		}
		if i > 0 && msg(i)["position"].(float64) <= msg(i - 1)["position"].(float64) {
			t.Errorf("positions %v, %v are not increasing", msg(i - 1)["position"], msg(i)["position"])
		}
	}
	if fmt.Sprint(roles) != "[user assistant tool assistant]" {
		t.Fatalf("roles = %v, want [user assistant tool assistant]", roles)
	}
	if msg(0)["content"] != "what time is it?" {
		t.Errorf("user content = %v, want the input", msg(0)["content"])
	}
	calls, _ := msg(1)["tool_calls"].([]any)
	if len(calls) != 1 || msg(1)["content"] != "Checking the time." {
		t.Fatalf("assistant message = %v, want text and one tool call", msg(1))
	}
	call := calls[0].(map[string]any)
	if call["name"] != "current_time" || compactJSON(t, []byte(call["arguments"].(string))) != `{"timezone":"UTC"}` || call["id"] == "" {
		t.Errorf("tool call = %v, want current_time {timezone: UTC} with an id", call)
	}
	if msg(2)["tool_call_id"] != call["id"] || msg(2)["is_error"] != false || msg(2)["content"] == "" {
		t.Errorf("tool message = %v, want the result of call %v", msg(2), call["id"])
	}
	if msg(3)["content"] != "Done." || len(msg(3)["tool_calls"].([]any)) != 0 || msg(3)["tool_call_id"] != nil {
		t.Errorf("final message = %v, want Done. with no tool calls", msg(3))
	}

	all := listIDs(t, page)
	for _, limit := range []int{1, 3, 4} {
		if ids, _ := walkPages(t, ts, "/sessions/"+id+"/messages", limit); !slices.Equal(ids, all) {
			t.Errorf("limit %d: messages = %v, want %v oldest first", limit, ids, all)
		}
	}

	unknown := uuid.Must(uuid.NewV7()).String()
	runErrorCases(t, ts, []errorCase{
		{name: "ErrNotFound", method: "GET", path: "/sessions/" + unknown + "/messages", status: 404, code: "session_not_found"},
		{name: "ErrLimit", method: "GET", path: "/sessions/" + id + "/messages?limit=201", status: 400, code: "invalid_request", field: "limit"},
		{name: "ErrCursor", method: "GET", path: "/sessions/" + id + "/messages?cursor=bm9wZQ", status: 400, code: "invalid_request", field: "cursor"},
	})
}

// TestRuns_IfBusy: each busy policy through HTTP. queue, interrupt and
// steer answer 202 with a queued run of their own; a steer's run ends
// steered into the run its input joined; a full queue is 429 queue_full.
func TestRuns_IfBusy(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Limits: kernel.Limits{MaxQueued: 2}}})
	id := ts.createSession(t, "waiter")
	active := ts.startRun(t, id, "first")
	<-ts.kernel.Wait.Started()

	queued := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"second","if_busy":"queue"}`)
	if queued["state"] != "queued" || queued["start_seq"] != nil || queued["started_at"] != nil {
		t.Errorf("queued run = %v", queued)
	}
	steered := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"also","if_busy":"steer"}`)
	if steered["id"] == active || steered["state"] != "queued" || steered["if_busy"] != "steer" {
		t.Errorf("steer answered %v, want a run of its own, queued to join %s", steered, active)
	}
	wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"third","if_busy":"queue"}`), http.StatusTooManyRequests, "queue_full")
	rejected := wantProblem(t, ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"x"}`), http.StatusConflict, "session_busy")
	if rejected["active_run_id"] != active {
		t.Errorf("active_run_id = %v, want %s", rejected["active_run_id"], active)
	}
	ts.kernel.Wait.Release()
	if run := ts.waitRun(t, id, queued["id"].(string)); run["state"] != "succeeded" {
		t.Errorf("queued run ended %v", run["state"])
	}
	if run := ts.waitRun(t, id, steered["id"].(string)); run["state"] != "steered" || run["steered_into"] != active {
		t.Errorf("the steer ended %v into %v, want steered into %s", run["state"], run["steered_into"], active)
	}
}

// TestRuns_StreamQueued: a queued run's inline stream waits for the run
// to start and carries exactly its events, from RUN_STARTED to its end.
func TestRuns_StreamQueued(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "waiter")
	first := ts.startRun(t, id, "first")
	<-ts.kernel.Wait.Started()
	s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"next","if_busy":"queue"}`)
	ts.kernel.Wait.Release()
	frames := s.events(t, nil) // to EOF: the server ends it after the run
	if frames[0].event != "RUN_STARTED" || strings.Contains(frames[0].data, first) || !runEnded(frames[len(frames)-1]) {
		t.Fatalf("stream = %s .. %s, want exactly the queued run", frames[0].event, frames[len(frames)-1].event)
	}
	aguitest.VerifyJSON(t, dataObjects(frames))
}

// TestRuns_StreamCancelledWhileQueued: a queued run cancelled before it
// starts logs nothing; its inline stream ends at the next heartbeat.
func TestRuns_StreamCancelledWhileQueued(t *testing.T) {
	ts := newServer(t, serverOptions{streams: httpapi.StreamOptions{Heartbeat: 20 * time.Millisecond}})
	id := ts.createSession(t, "waiter")
	ts.startRun(t, id, "first")
	<-ts.kernel.Wait.Started()
	s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"next","if_busy":"queue"}`)
	runID := strings.TrimPrefix(s.res.Header.Get("Location"), "/sessions/"+id+"/runs/")
	ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+runID+"/cancel", "")
	if frames := s.events(t, nil); len(frames) != 0 {
		t.Fatalf("a run that never started streamed %d frames", len(frames))
	}
	ts.kernel.Wait.Release()
}

// slowStore is the memory store taking its time, as a busy SQLite file
// does, to record a run's end (so input posted on its RUN_FINISHED waits
// for the session's driver, which starts it) and to mark a session
// running (so a run is recorded running, and answered so, that long
// before its RUN_STARTED is logged and recorded on it).
type slowStore struct{ *memory.Store }

func (s slowStore) UpdateRun(ctx context.Context, r session.Run) error {
	if r.State.Terminal() {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Store.UpdateRun(ctx, r)
}

func (s slowStore) UpdateSession(ctx context.Context, sess session.Session) error {
	if sess.State == session.StateRunning {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Store.UpdateSession(ctx, sess)
}

// TestRuns_StreamRunStarting: the run a POST starts is answered as soon as
// it is running, which can be before its RUN_STARTED is recorded on it;
// its stream must still deliver the whole run, from that RUN_STARTED.
func TestRuns_StreamRunStarting(t *testing.T) {
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: slowStore{memory.New()}}})
	id := ts.createSession(t, "echo")
	for i := range 10 {
		s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"turn `+strconv.Itoa(i)+`"}`)
		frames := s.events(t, runEnded) // the next input is posted on RUN_FINISHED, as a chat does
		if len(frames) == 0 || frames[0].event != "RUN_STARTED" || !runEnded(frames[len(frames)-1]) {
			t.Fatalf("turn %d: stream of %d frames, want the whole run: %+v", i, len(frames), frames)
		}
	}
}
