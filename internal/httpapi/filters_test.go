package httpapi_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// TestSessionList_Filters lists sessions by metadata, state, agent,
// parent and creation time, alone and together, in pages, as two tenants.
func TestSessionList_Filters(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
	acme := []string{"Authorization", "Bearer k1"}
	other := []string{"Authorization", "Bearer k2"}
	create := func(body string, header []string) string {
		return ts.must(t, http.StatusCreated, "POST", "/sessions", body, header...)["id"].(string)
	}
	alice1 := create(`{"agent":"echo","metadata":{"user":"alice","team":"core"}}`, acme)
	bob := create(`{"agent":"echo","metadata":{"user":"bob","team":"core"}}`, acme)
	alice2 := create(`{"agent":"waiter","metadata":{"user":"alice","team":"web"}}`, acme)
	child := create(`{"agent":"echo","parent_id":"`+alice1+`","metadata":{"user":"alice"}}`, acme)
	mid := ts.must(t, http.StatusOK, "GET", "/sessions/"+child, "", acme...)["created_at"].(string)
	alice3 := create(`{"agent":"echo","metadata":{"user":"alice","team":"core"}}`, acme)
	ts.waitRunAs(t, alice3, ts.must(t, http.StatusAccepted, "POST", "/sessions/"+alice3+"/run", `{"input":"hi"}`, acme...)["id"].(string), acme)
	otherAlice := create(`{"agent":"echo","metadata":{"user":"alice","org":"globex"}}`, other)

	tests := []struct {
		name   string
		query  url.Values
		header []string
		want   []string
	}{
		{"metadata", url.Values{"metadata.user": {"alice"}}, acme, []string{alice3, child, alice2, alice1}},
		{"two metadata entries", url.Values{"metadata.user": {"alice"}, "metadata.team": {"core"}}, acme, []string{alice3, alice1}},
		{"metadata and agent", url.Values{"metadata.user": {"alice"}, "agent": {"waiter"}}, acme, []string{alice2}},
		{"metadata and parent", url.Values{"metadata.user": {"alice"}, "parent_id": {alice1}}, acme, []string{child}},
		{"metadata and state", url.Values{"metadata.team": {"core"}, "state": {"completed"}}, acme, []string{alice3}},
		{"created before", url.Values{"metadata.user": {"alice"}, "created_before": {mid}}, acme, []string{alice2, alice1}},
		{"created after", url.Values{"created_after": {mid}}, acme, []string{alice3}},
		{"no session holds both", url.Values{"metadata.user": {"bob"}, "metadata.team": {"web"}}, acme, nil},
		{"same value twice", url.Values{"metadata.user": {"bob", "bob"}}, acme, []string{bob}},
		{"the other tenant's value", url.Values{"metadata.org": {"globex"}}, acme, nil},
		{"the other tenant's sessions", url.Values{"metadata.user": {"alice"}}, other, []string{otherAlice}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := walkPages(t, ts, "/sessions?"+tt.query.Encode(), 1, tt.header...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("listed %v, want %v", got, tt.want)
			}
		})
	}
	runErrorCases(t, ts, []errorCase{
		{name: "BadCreatedAfter", method: "GET", path: "/sessions?created_after=yesterday", header: acme,
			status: http.StatusBadRequest, code: "invalid_request", field: "created_after", fieldHas: "RFC 3339"},
		{name: "BadCreatedBefore", method: "GET", path: "/sessions?created_before=" + url.QueryEscape(time.Now().Format(time.DateTime)), header: acme,
			status: http.StatusBadRequest, code: "invalid_request", field: "created_before"},
		{name: "MetadataKeyTwice", method: "GET", path: "/sessions?metadata.user=a&metadata.user=b", header: acme,
			status: http.StatusBadRequest, code: "invalid_request", field: "metadata.user"},
		{name: "BadState", method: "GET", path: "/sessions?state=sleeping", header: acme,
			status: http.StatusBadRequest, code: "invalid_request", field: "state"},
	})
}

// TestLists_UnknownParameter sends every list route a parameter it does
// not take, and one it does.
func TestLists_UnknownParameter(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	runID := ts.startRun(t, id, "hi")
	ts.waitRun(t, id, runID)
	lists := []string{
		"/agents",
		"/sessions",
		"/sessions/" + id + "/children",
		"/sessions/" + id + "/runs",
		"/sessions/" + id + "/runs/" + runID + "/approvals",
		"/sessions/" + id + "/events",
		"/sessions/" + id + "/messages",
		"/sessions/" + id + "/memory",
	}
	for _, path := range lists {
		t.Run(path, func(t *testing.T) {
			for _, name := range []string{"colour", "metadata", "metadata.", "Limit"} {
				res := ts.doWithin(t, 5*time.Second, "GET", path+"?"+url.Values{name: {"x"}}.Encode(), "", "Accept", "application/json")
				p := wantProblem(t, res, http.StatusBadRequest, "unknown_parameter")
				if p["parameter"] != name {
					t.Errorf("parameter = %v, want %q", p["parameter"], name)
				}
			}
			if path != "/sessions" {
				return
			}
			ts.must(t, http.StatusOK, "GET", path+"?metadata.colour=x", "")
		})
	}
	// A route that is not a list is not affected.
	ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"?colour=x", "")
}

// TestRunList_State lists a session's runs by state.
func TestRunList_State(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	first := ts.startRun(t, id, "one")
	ts.waitRun(t, id, first)
	second := ts.startRun(t, id, "two")
	ts.waitRun(t, id, second)
	ts.must(t, http.StatusOK, "POST", "/sessions/"+id+"/runs/"+second+"/cancel", "")
	cancelled := ts.startRun(t, id, "three")
	ts.waitRun(t, id, cancelled)

	succeeded, _ := walkPages(t, ts, "/sessions/"+id+"/runs?state=succeeded", 1)
	all, _ := walkPages(t, ts, "/sessions/"+id+"/runs", 1)
	if want := []string{cancelled, second, first}; !slices.Equal(all, want) || !slices.Equal(succeeded, want) {
		t.Errorf("runs %v, succeeded %v, want %v for both", all, succeeded, want)
	}
	if none, _ := walkPages(t, ts, "/sessions/"+id+"/runs?state=failed", 1); len(none) != 0 {
		t.Errorf("failed runs %v, want none", none)
	}
	runErrorCases(t, ts, []errorCase{{name: "BadState", method: "GET", path: "/sessions/" + id + "/runs?state=done",
		status: http.StatusBadRequest, code: "invalid_request", field: "state"}})
}

// TestEvents_RunID reads one run's events, among a session's three, as
// JSON pages and as a stream.
func TestEvents_RunID(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	var runs []map[string]any
	for _, input := range []string{"one", "two", "three"} {
		runs = append(runs, ts.waitRun(t, id, ts.startRun(t, id, input)))
	}
	mid := runs[1]
	runID := mid["id"].(string)
	start, end := int64(mid["start_seq"].(float64)), int64(mid["end_seq"].(float64))

	t.Run("Pages", func(t *testing.T) {
		var seqs []int64
		next := "0"
		for range 50 {
			page, evs := ts.getEventPage(t, id, "?run_id="+runID+"&limit=2&after="+next)
			for _, ev := range evs {
				if ev.Metadata.Kerneld.RunID != runID {
					t.Fatalf("event %d of run %s in run %s's page", ev.Metadata.Kerneld.Seq, ev.Metadata.Kerneld.RunID, runID)
				}
				seqs = append(seqs, ev.Metadata.Kerneld.Seq)
			}
			if len(evs) == 0 {
				break
			}
			next = strconv.FormatInt(*page.NextAfter, 10)
		}
		if len(seqs) == 0 || seqs[0] != start || seqs[len(seqs)-1] != end || int64(len(seqs)) != end-start+1 {
			t.Errorf("seqs %v, want %d to %d", seqs, start, end)
		}
	})
	t.Run("Stream", func(t *testing.T) {
		frames := ts.openStream(t, "GET", "/sessions/"+id+"/events?run_id="+runID, "").events(t, nil) // ends by itself
		if len(frames) == 0 || frames[0].id != start || frames[len(frames)-1].id != end || frames[0].event != "RUN_STARTED" {
			t.Fatalf("streamed %d frames, want seq %d (RUN_STARTED) to %d", len(frames), start, end)
		}
	})
	t.Run("StreamResumed", func(t *testing.T) {
		frames := ts.openStream(t, "GET", "/sessions/"+id+"/events?run_id="+runID, "",
			"Last-Event-ID", strconv.FormatInt(end-1, 10)).events(t, nil)
		if len(frames) != 1 || frames[0].id != end {
			t.Fatalf("streamed %v, want only seq %d", frames, end)
		}
	})
	t.Run("StreamAfterItsEnd", func(t *testing.T) {
		res := ts.doWithin(t, 5*time.Second, "GET", "/sessions/"+id+"/events?run_id="+runID+"&after="+strconv.FormatInt(end, 10), "")
		if res.status != http.StatusNoContent {
			t.Errorf("status = %d, want 204", res.status)
		}
	})
	runErrorCases(t, ts, []errorCase{
		{name: "UnknownRun", method: "GET", path: "/sessions/" + id + "/events?run_id=" + id, header: []string{"Accept", "application/json"},
			status: http.StatusNotFound, code: "run_not_found"},
		{name: "UnknownRunStream", method: "GET", path: "/sessions/" + id + "/events?run_id=nope",
			status: http.StatusNotFound, code: "run_not_found"},
		{name: "WithSnapshot", method: "GET", path: "/sessions/" + id + "/events?snapshot=messages&run_id=" + runID,
			status: http.StatusBadRequest, code: "invalid_request", field: "run_id"},
	})
}
