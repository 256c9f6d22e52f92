package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
)

// eventPage is the JSON page mode of GET /sessions/{id}/events.
type eventPage struct {
	Data      []json.RawMessage `json:"data"`
	NextAfter *int64            `json:"next_after"`
}

// pagedEvent is what a test reads of one event.
type pagedEvent struct {
	Type     string `json:"type"`
	Metadata struct {
		Kerneld struct {
			Seq       int64  `json:"seq"`
			SessionID string `json:"sessionId"`
			RunID     string `json:"runId"`
		} `json:"kerneld"`
	} `json:"metadata"`
}

// getEventPage fetches one JSON page of a session's events.
func (ts *testServer) getEventPage(t *testing.T, id, query string, header ...string) (eventPage, []pagedEvent) {
	t.Helper()
	header = append([]string{"Accept", "application/json"}, header...)
	res := ts.do(t, "GET", "/sessions/"+id+"/events"+query, "", header...)
	if res.status != http.StatusOK {
		t.Fatalf("GET events%s = %d %s, want 200", query, res.status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var page eventPage
	if err := json.Unmarshal(res.body, &page); err != nil {
		t.Fatal(err)
	}
	if page.Data == nil || page.NextAfter == nil {
		t.Fatalf("page = %s, want data and next_after", res.body)
	}
	evs := make([]pagedEvent, len(page.Data))
	for i, raw := range page.Data {
		if err := json.Unmarshal(raw, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return page, evs
}

func TestEvents_JSONPage(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "tooluser")
	run1 := ts.startRun(t, id, "first")
	ts.waitRun(t, id, run1)
	run2 := ts.startRun(t, id, "second")
	done := ts.waitRun(t, id, run2)
	last := int64(done["end_seq"].(float64))

	page, all := ts.getEventPage(t, id, "?limit=1000")
	if int64(len(all)) != last || *page.NextAfter != last {
		t.Fatalf("%d events, next_after %d, want %d and %d", len(all), *page.NextAfter, last, last)
	}
	for i, ev := range all {
		k := ev.Metadata.Kerneld
		if k.Seq != int64(i+1) || k.SessionID != id || ev.Type == "" {
			t.Errorf("event %d = %+v, want seq %d of session %s", i, ev, i+1, id)
		}
	}
	if all[0].Type != "RUN_STARTED" || all[0].Metadata.Kerneld.RunID != run1 {
		t.Errorf("first event = %+v, want RUN_STARTED of %s", all[0], run1)
	}
	if all[len(all)-1].Type != "RUN_FINISHED" || all[len(all)-1].Metadata.Kerneld.RunID != run2 {
		t.Errorf("last event = %+v, want RUN_FINISHED of %s", all[len(all)-1], run2)
	}

	t.Run("Default", func(t *testing.T) {
		if _, evs := ts.getEventPage(t, id, ""); len(evs) != len(all) {
			t.Errorf("%d events without limit, want all %d", len(evs), len(all))
		}
	})

	t.Run("Paging", func(t *testing.T) {
		for _, limit := range []int{1, 3, 7} {
			var seqs []int64
			after := int64(0)
			for range 1000 {
				page, evs := ts.getEventPage(t, id, "?limit="+strconv.Itoa(limit)+"&after="+strconv.FormatInt(after, 10))
				if len(evs) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(evs))
				}
				if len(evs) == 0 {
					if *page.NextAfter != after {
						t.Errorf("empty page next_after = %d, want %d", *page.NextAfter, after)
					}
					break
				}
				for _, ev := range evs {
					seqs = append(seqs, ev.Metadata.Kerneld.Seq)
				}
				if want := evs[len(evs)-1].Metadata.Kerneld.Seq; *page.NextAfter != want {
					t.Errorf("next_after = %d, want the last seq %d", *page.NextAfter, want)
				}
				after = *page.NextAfter
			}
			if int64(len(seqs)) != last {
				t.Fatalf("limit %d: read %d events, want %d", limit, len(seqs), last)
			}
			for i, s := range seqs {
				if s != int64(i+1) {
					t.Fatalf("limit %d: seqs = %v, want 1..%d each once", limit, seqs, last)
				}
			}
		}
	})

	t.Run("After", func(t *testing.T) {
		_, evs := ts.getEventPage(t, id, "?after=5")
		if len(evs) == 0 {
			t.Fatal("after=5: no events")
		}
		if len(evs) != len(all)-5 || evs[0].Metadata.Kerneld.Seq != 6 {
			t.Errorf("after=5: %d events from seq %d, want %d from 6", len(evs), evs[0].Metadata.Kerneld.Seq, len(all)-5)
		}
		page, evs := ts.getEventPage(t, id, "?after="+strconv.FormatInt(last, 10))
		if len(evs) != 0 || *page.NextAfter != last {
			t.Errorf("after the last event: %d events next_after %d, want none and %d", len(evs), *page.NextAfter, last)
		}
	})

	t.Run("LastEventID", func(t *testing.T) {
		_, evs := ts.getEventPage(t, id, "", "Last-Event-ID", "7")
		if len(evs) == 0 || evs[0].Metadata.Kerneld.Seq != 8 {
			t.Errorf("Last-Event-ID 7: first seq %v, want 8", evs)
		}
		// The header is what a reconnecting client sends; it wins.
		_, evs = ts.getEventPage(t, id, "?after=2", "Last-Event-ID", "7")
		if len(evs) == 0 || evs[0].Metadata.Kerneld.Seq != 8 {
			t.Errorf("Last-Event-ID 7 with after=2: first seq %v, want 8", evs)
		}
	})

	t.Run("LimitBounds", func(t *testing.T) {
		if _, evs := ts.getEventPage(t, id, "?limit=1"); len(evs) != 1 {
			t.Errorf("limit=1: %d events", len(evs))
		}
		ts.getEventPage(t, id, "?limit=1000")
	})

	t.Run("NewSession", func(t *testing.T) {
		page, evs := ts.getEventPage(t, ts.createSession(t, "echo"), "")
		if len(evs) != 0 || *page.NextAfter != 0 {
			t.Errorf("new session: %d events next_after %d, want none and 0", len(evs), *page.NextAfter)
		}
	})

	accept := []string{"Accept", "application/json"}
	get := func(name, query string, status int, code, field string, header ...string) errorCase {
		return errorCase{name: name, method: "GET", path: "/sessions/" + id + "/events" + query,
			header: append(append([]string{}, accept...), header...), status: status, code: code, field: field}
	}
	runErrorCases(t, ts, []errorCase{
		get("AfterNegative", "?after=-1", 400, "invalid_request", "after"),
		get("AfterNotNumber", "?after=x", 400, "invalid_request", "after"),
		get("AfterFraction", "?after=1.5", 400, "invalid_request", "after"),
		get("LastEventIDNotNumber", "", 400, "invalid_request", "Last-Event-ID", "Last-Event-ID", "abc"),
		get("LastEventIDNegative", "", 400, "invalid_request", "Last-Event-ID", "Last-Event-ID", "-3"),
		get("LimitZero", "?limit=0", 400, "invalid_request", "limit"),
		get("LimitTooLarge", "?limit=1001", 400, "invalid_request", "limit"),
		get("LimitNotNumber", "?limit=many", 400, "invalid_request", "limit"),
		{name: "UnknownSession", method: "GET", path: "/sessions/" + uuid.Must(uuid.NewV7()).String() + "/events",
			header: accept, status: 404, code: "session_not_found"},
		{name: "MalformedSession", method: "GET", path: "/sessions/x/events", header: accept, status: 404, code: "session_not_found"},
		{name: "StreamBadAfter", method: "GET", path: "/sessions/" + id + "/events?after=x",
			header: []string{"Accept", "text/event-stream"}, status: 400, code: "invalid_request", field: "after"},
		{name: "StreamUnknownSession", method: "GET", path: "/sessions/" + uuid.Must(uuid.NewV7()).String() + "/events",
			header: []string{"Accept", "text/event-stream"}, status: 404, code: "session_not_found"},
	})
}

// TestEvents_CursorAhead: a cursor beyond the session's last event is
// refused before anything is streamed, in both modes and from both the
// header and the query, with the last seq the client may resume from.
func TestEvents_CursorAhead(t *testing.T) {
	ts := newServer(t, serverOptions{})
	id := ts.createSession(t, "echo")
	done := ts.waitRun(t, id, ts.startRun(t, id, "hello"))
	last := int64(done["end_seq"].(float64))
	ahead := strconv.FormatInt(last+1, 10)
	modes := map[string]string{"Stream": "text/event-stream", "Page": "application/json", "NoAccept": ""}
	for mode, accept := range modes {
		for name, req := range map[string]struct{ query, header string }{
			"After": {"?after=" + ahead, ""}, "LastEventID": {"", ahead}, "HeaderWins": {"?after=1", ahead},
		} {
			t.Run(mode+"/"+name, func(t *testing.T) {
				var header []string
				if accept != "" {
					header = append(header, "Accept", accept)
				}
				if req.header != "" {
					header = append(header, "Last-Event-ID", req.header)
				}
				res := ts.doWithin(t, 5*time.Second, "GET", "/sessions/"+id+"/events"+req.query, "", header...)
				p := wantProblem(t, res, http.StatusBadRequest, "cursor_ahead")
				if p["last_seq"] != float64(last) {
					t.Errorf("last_seq = %v, want %d", p["last_seq"], last)
				}
			})
		}
	}
	t.Run("NewSession", func(t *testing.T) {
		fresh := ts.createSession(t, "echo")
		res := ts.do(t, "GET", "/sessions/"+fresh+"/events?after=1", "", "Accept", "application/json")
		if p := wantProblem(t, res, http.StatusBadRequest, "cursor_ahead"); p["last_seq"] != float64(0) {
			t.Errorf("last_seq = %v, want 0", p["last_seq"])
		}
	})
	t.Run("AtTheEndStreams", func(t *testing.T) {
		// The last seq itself is a valid cursor: the stream waits for the
		// next run and delivers it whole.
		s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "", "Last-Event-ID", strconv.FormatInt(last, 10))
		ts.startRun(t, id, "again")
		frames := s.events(t, runEnded)
		if len(frames) == 0 || frames[0].id != last+1 || frames[0].event != "RUN_STARTED" {
			t.Fatalf("frames = %+v, want the next run from seq %d", frames, last+1)
		}
	})
}
