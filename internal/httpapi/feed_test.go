package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// feedServer serves the feed to two tenants: acme (key k1), other (k2).
func feedServer(t *testing.T) *testServer {
	return newServer(t, serverOptions{feed: true, api: httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}}})
}

// feedFrame is one frame of the feed, decoded.
type feedFrame struct {
	id      int64
	event   string
	session string
	status  string
	pending float64
	unread  float64
}

// nextFeedFrames reads n event frames of a feed stream.
func nextFeedFrames(t *testing.T, s *sseStream, n int) []feedFrame {
	t.Helper()
	var out []feedFrame
	for len(out) < n {
		f, err := s.next()
		if err != nil {
			t.Fatalf("read feed after %v: %v", out, err)
		}
		if f.event == "" {
			continue // retry line, ping
		}
		var data struct {
			Type    string
			Seq     int64
			Session map[string]any
		}
		if err := json.Unmarshal([]byte(f.data), &data); err != nil {
			t.Fatalf("frame %q: %v", f.data, err)
		}
		if data.Type != f.event || data.Seq != f.id {
			t.Errorf("frame %d %s carries type %s seq %d", f.id, f.event, data.Type, data.Seq)
		}
		out = append(out, feedFrame{id: f.id, event: f.event, session: fmt.Sprint(data.Session["id"]),
			status: fmt.Sprint(data.Session["status"]), pending: toFloat(data.Session["pending_approvals"]),
			unread: toFloat(data.Session["unread"])})
	}
	return out
}

func toFloat(v any) float64 { f, _ := v.(float64); return f }

func TestSessionFeed(t *testing.T) {
	ts := feedServer(t)
	acme, other := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}
	live := ts.openStream(t, "GET", "/sessions/events", "", acme...)

	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, other...) // never seen by acme
	a := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acme...)["id"].(string)
	ts.must(t, http.StatusOK, "PATCH", "/sessions/"+a, `{"name":"renamed"}`, acme...)
	run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+a+"/run", `{"input":"hi"}`, acme...)["id"].(string)
	waitRunAs(t, ts, a, run, acme)

	g := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"gated"}`, acme...)["id"].(string)
	grun := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+g+"/run", `{"input":"save"}`, acme...)["id"].(string)
	base := "/sessions/" + g + "/runs/" + grun + "/approvals"
	want := []feedFrame{
		{event: "session.created", session: a, status: "idle"},
		{event: "session.updated", session: a},
		{event: "session.status", session: a},
		{event: "run.ended", session: a, status: "idle"},
		{event: "session.created", session: g, status: "idle"},
		{event: "session.status", session: g},
		{event: "approval.requested", session: g, status: "waiting_input"},
		{event: "approval.requested", session: g, status: "waiting_input"},
	}
	got := nextFeedFrames(t, live, len(want))
	pending := ts.must(t, http.StatusOK, "GET", base, "", acme...)["data"].([]any)
	for _, p := range pending {
		call := p.(map[string]any)["tool_call_id"].(string)
		ts.must(t, http.StatusOK, "POST", base+"/"+call, `{"decision":"approve"}`, acme...)
		got = append(got, nextFeedFrames(t, live, 1)...)
	}
	want = append(want, feedFrame{event: "approval.decided", session: g}, feedFrame{event: "approval.decided", session: g},
		feedFrame{event: "run.ended", session: g, status: "idle"})
	waitRunAs(t, ts, g, grun, acme)
	got = append(got, nextFeedFrames(t, live, 1)...)
	ts.must(t, http.StatusNoContent, "DELETE", "/sessions/"+a, "", acme...)
	want = append(want, feedFrame{event: "session.deleted", session: a, status: "closed"})
	got = append(got, nextFeedFrames(t, live, 1)...)

	if len(got) != len(want) {
		t.Fatalf("feed = %+v, want %d frames", got, len(want))
	}
	for i, w := range want {
		f := got[i]
		if f.id != int64(i+1) || f.event != w.event || f.session != w.session || (w.status != "" && f.status != w.status) {
			t.Errorf("frame %d = %+v, want %+v with id %d", i, f, w, i+1)
		}
	}
	if got[6].pending < 1 {
		t.Errorf("approval.requested says %v pending approvals", got[6].pending)
	}

	t.Run("resumes after Last-Event-ID", func(t *testing.T) {
		resumed := ts.openStream(t, "GET", "/sessions/events", "", append(acme, "Last-Event-ID", "9")...)
		rest := nextFeedFrames(t, resumed, len(want)-9)
		for i, f := range rest {
			if f.id != int64(10+i) || f.event != want[9+i].event {
				t.Errorf("resumed frame %d = %+v, want %s with id %d", i, f, want[9+i].event, 10+i)
			}
		}
	})

	t.Run("another tenant sees only its own", func(t *testing.T) {
		theirs := ts.openStream(t, "GET", "/sessions/events?after=0", "", other...)
		frames := nextFeedFrames(t, theirs, 1)
		if frames[0].id != 1 || frames[0].event != "session.created" || frames[0].session == a || frames[0].session == g {
			t.Errorf("other tenant's feed starts %+v", frames[0])
		}
		res := ts.do(t, "GET", "/sessions/events?after="+strconv.Itoa(len(want)), "", other...)
		if res.status != http.StatusBadRequest {
			t.Errorf("a cursor beyond the other tenant's feed: %d %s", res.status, res.body)
		}
	})

	t.Run("snapshot starts with the current page, filtered", func(t *testing.T) {
		snap := ts.openStream(t, "GET", "/sessions/events?snapshot=true&agent=gated", "", acme...)
		f, err := snap.next()
		for err == nil && f.event == "" {
			f, err = snap.next()
		}
		if err != nil || f.event != "snapshot" || f.id != int64(len(want)) {
			t.Fatalf("first frame = %+v, %v; want the snapshot at id %d", f, err, len(want))
		}
		var body struct{ Data []map[string]any }
		if err := json.Unmarshal([]byte(f.data), &body); err != nil || len(body.Data) != 1 || body.Data[0]["id"] != g {
			t.Errorf("snapshot = %s, want the gated session alone", f.data)
		}
		ts.must(t, http.StatusOK, "PATCH", "/sessions/"+g, `{"title":"Saved"}`, acme...)
		next := nextFeedFrames(t, snap, 1)
		if next[0].event != "session.updated" || next[0].session != g {
			t.Errorf("after the snapshot: %+v", next[0])
		}
	})
}

// waitRunAs waits for a run of a tenant's session to end.
func waitRunAs(t *testing.T, ts *testServer, id, run string, auth []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+run, "", auth...)
		switch r["state"] {
		case "succeeded", "failed", "cancelled", "interrupted":
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never ended: %v", run, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
