package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// readServer serves tenant acme to two keys, k1 and k1b, and tenant
// other to k2.
func readServer(t *testing.T, userHeader bool) *testServer {
	return newServer(t, serverOptions{feed: true, api: httpapi.Options{
		APIKeys:    map[string]string{"k1": "acme", "k1b": "acme", "k2": "other"},
		UserHeader: userHeader,
	}})
}

// ranOnce runs input in session id as auth and waits for the run's end.
func ranOnce(t *testing.T, ts *testServer, id, input string, auth []string) {
	t.Helper()
	run := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", fmt.Sprintf(`{"input":%q}`, input), auth...)["id"].(string)
	waitRunAs(t, ts, id, run, auth)
}

// unreadAs returns the session's unread count and read cursor as auth
// sees them, in GET /sessions/{id} and in GET /sessions, which must agree.
func unreadAs(t *testing.T, ts *testServer, id string, auth []string) (unread, readSeq float64) {
	t.Helper()
	s := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "", auth...)
	for _, item := range ts.must(t, http.StatusOK, "GET", "/sessions", "", auth...)["data"].([]any) {
		if l := item.(map[string]any); l["id"] == id && (l["unread"] != s["unread"] || l["read_seq"] != s["read_seq"]) {
			t.Errorf("list says unread %v read_seq %v, GET says %v %v", l["unread"], l["read_seq"], s["unread"], s["read_seq"])
		}
	}
	return s["unread"].(float64), s["read_seq"].(float64)
}

func TestSessionRead_UnreadPerKey(t *testing.T) {
	ts := readServer(t, false)
	k1, k1b, k2 := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k1b"}, []string{"Authorization", "Bearer k2"}
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k1...)["id"].(string)
	ranOnce(t, ts, id, "one", k1)

	if u, seq := unreadAs(t, ts, id, k1); u != 1 || seq != 0 {
		t.Fatalf("before reading: unread %v read_seq %v, want 1 and 0", u, seq)
	}
	read := ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/read", "", k1...)
	last := read["last_seq"].(float64)
	if read["unread"] != 0.0 || read["read_seq"] != last {
		t.Errorf("PUT read answered unread %v read_seq %v, want 0 and %v", read["unread"], read["read_seq"], last)
	}
	if u, _ := unreadAs(t, ts, id, k1b); u != 1 {
		t.Errorf("another key of the tenant: unread %v, want 1", u)
	}

	ranOnce(t, ts, id, "two", k1)
	if u, seq := unreadAs(t, ts, id, k1); u != 1 || seq != last {
		t.Errorf("after a second run: unread %v read_seq %v, want 1 and %v", u, seq, last)
	}
	if u, _ := unreadAs(t, ts, id, k1b); u != 2 {
		t.Errorf("another key after a second run: unread %v, want 2", u)
	}

	t.Run("NeverBackwards", func(t *testing.T) {
		back := ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/read", `{"seq":1}`, k1...)
		if back["read_seq"] != last || back["unread"] != 1.0 {
			t.Errorf("reading seq 1 again moved the cursor: read_seq %v unread %v, want %v and 1", back["read_seq"], back["unread"], last)
		}
	})
	t.Run("PastTheEnd", func(t *testing.T) {
		end := ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/read", `{"seq":1000000}`, k1b...)
		if end["read_seq"] != end["last_seq"] || end["unread"] != 0.0 {
			t.Errorf("reading past the end: read_seq %v (last_seq %v) unread %v", end["read_seq"], end["last_seq"], end["unread"])
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		wantProblem(t, ts.do(t, "PUT", "/sessions/"+id+"/read", `{"seq":-1}`, k1...), http.StatusBadRequest, "invalid_request")
		wantProblem(t, ts.do(t, "PUT", "/sessions/"+id+"/read", `{"seq":"x"}`, k1...), http.StatusBadRequest, "invalid_request")
		wantProblem(t, ts.do(t, "PUT", "/sessions/"+id+"/read", `{}`, k2...), http.StatusNotFound, "session_not_found")
	})
}

func TestSessionRead_UserHeader(t *testing.T) {
	ts := readServer(t, true)
	k1 := []string{"Authorization", "Bearer k1"}
	ann, bob := slices.Concat(k1, []string{httpapi.UserHeader, "ann"}), slices.Concat(k1, []string{httpapi.UserHeader, "bob"})
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, ann...)["id"].(string)
	ranOnce(t, ts, id, "hello", ann)
	ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/read", "", ann...)
	if u, _ := unreadAs(t, ts, id, ann); u != 0 {
		t.Errorf("ann read everything: unread %v", u)
	}
	if u, _ := unreadAs(t, ts, id, bob); u != 1 {
		t.Errorf("bob read nothing: unread %v, want 1", u)
	}
	if u, _ := unreadAs(t, ts, id, k1); u != 1 {
		t.Errorf("the key without a user read nothing: unread %v, want 1", u)
	}
}

func TestSessionRead_Feed(t *testing.T) {
	ts := readServer(t, false)
	k1, k1b := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k1b"}
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k1...)["id"].(string)
	ranOnce(t, ts, id, "one", k1)
	mine := ts.openStream(t, "GET", "/sessions/events", "", k1...)
	theirs := ts.openStream(t, "GET", "/sessions/events", "", k1b...)
	ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/read", "", k1...)
	for _, c := range []struct {
		name   string
		stream *sseStream
		unread float64
	}{{"reader", mine, 0}, {"other key", theirs, 1}} {
		f := nextFeedFrames(t, c.stream, 1)[0]
		if f.event != "session.read" || f.session != id || f.unread != c.unread {
			t.Errorf("%s's feed: %+v, want session.read of %s with unread %v", c.name, f, id, c.unread)
		}
	}
	// Reading again changes nothing, and the feed says nothing of it.
	ts.must(t, http.StatusOK, "PUT", "/sessions/"+id+"/read", "", k1...)
	ts.must(t, http.StatusOK, "PATCH", "/sessions/"+id, `{"name":"next"}`, k1...)
	if f := nextFeedFrames(t, mine, 1)[0]; f.event != "session.updated" {
		t.Errorf("after reading again, the feed's next frame is %+v, want session.updated", f)
	}
}
