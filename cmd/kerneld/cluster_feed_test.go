package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"
)

// TestCluster_Feed follows the session feed on one replica on Redis
// while another creates a session, runs it and marks it read: each change
// reaches the stream on the other replica, in order, with the reader's
// unread count.
func TestCluster_Feed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	testClusterFeed(t, testRedis(t))
}

func testClusterFeed(t *testing.T, store sharedStore) {
	c := newCluster(t, store)
	a, b := c.start("a"), c.start("b")
	feed := feedStream(t, b.base)
	defer feed.Close()

	id := post(t, a.base+"/sessions", `{"agent":"steady"}`)["id"].(string)
	run := post(t, a.base+"/sessions/"+id+"/run", `{"input":"hello"}`)["id"].(string)
	seen := feedUntil(t, feed, id, "run.ended")
	if seen[0].Type != "session.created" {
		t.Errorf("first entry of the session on B: %s, want session.created", seen[0].Type)
	}
	if got := seen[len(seen)-1].Session.Unread; got != 1 {
		t.Errorf("run.ended of run %s says unread %d, want 1", run, got)
	}
	if code, _ := request(t, "PUT", a.base+"/sessions/"+id+"/read", ""); code != http.StatusOK {
		t.Fatalf("PUT read on A = %d", code)
	}
	read := feedUntil(t, feed, id, "session.read")
	if got := read[len(read)-1].Session.Unread; got != 0 {
		t.Errorf("session.read says unread %d, want 0", got)
	}
}

// feedEntry is one frame of the feed, decoded.
type feedEntry struct {
	Type    string `json:"type"`
	Seq     int64  `json:"seq"`
	Session struct {
		ID     string `json:"id"`
		Unread int    `json:"unread"`
	} `json:"session"`
}

// feedStream opens the session feed at base.
func feedStream(t *testing.T, base string) *sseStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/sessions/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/sessions/events = %d", base, res.StatusCode)
	}
	return &sseStream{r: bufio.NewReader(res.Body), body: res.Body}
}

// feedUntil reads the feed until an entry of kind for session id, and
// returns the entries of that session read, which must come with
// increasing seqs.
func feedUntil(t *testing.T, s *sseStream, id, kind string) []feedEntry {
	t.Helper()
	var out []feedEntry
	var last int64
	s.until(t, func(f sseFrame) bool {
		var e feedEntry
		if f.event == "" || json.Unmarshal([]byte(f.data), &e) != nil {
			return false
		}
		if e.Seq <= last {
			t.Errorf("feed entry %d after %d", e.Seq, last)
		}
		last = e.Seq
		if e.Session.ID != id {
			return false
		}
		out = append(out, e)
		return e.Type == kind
	})
	return out
}
