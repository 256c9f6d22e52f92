package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// TestCluster_RedisRefusesWrites makes the Redis under a replica refuse
// writes mid-run, as Redis does at maxmemory under noeviction, then takes
// it away altogether. While writes are refused, the run pauses and is not
// reported ended, a new run is refused (409 while the session is busy,
// 503 storage_unavailable with Retry-After when it would need a write), a
// queued run, a cancel and a create are refused 503, and nothing answers
// 500; once Redis takes writes again the run goes on to its whole answer,
// its stream shows it with no gap, and the session takes runs again.
func TestCluster_RedisRefusesWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	r := startOwnRedis(t)
	a := newCluster(t, redisStore(r.url(), "kerneld:")).start("a")
	rc := redistest.Server{URL: r.url()}.Client(t)
	configSet := func(name, value string) {
		t.Helper()
		if err := rc.ConfigSet(t.Context(), name, value).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %s: %v", name, value, err)
		}
	}
	configSet("maxmemory-policy", "noeviction")

	id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
	runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
	body := stream(t, a.base, id, 0)
	defer body.Close()
	seen := body.until(t, func(f sseFrame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id >= 10 })

	configSet("maxmemory", "1") // below what Redis uses: every write that needs memory fails with OOM
	// The run must have met the refusal itself, not only the requests
	// below, which may all come between two of its appends.
	pollUntil(t, "the run's append refused", func() bool {
		return strings.Contains(a.logs.String(), "the store refused a run's events")
	})
	status, _, b := send(t, "POST", a.base+"/sessions/"+id+"/run", `{"input":"next"}`)
	if status != http.StatusConflict && status != http.StatusServiceUnavailable {
		t.Fatalf("POST run while Redis refuses writes = %d %s", status, b)
	}
	wantStorageRefusal(t, "POST", a.base+"/sessions/"+id+"/run", `{"input":"next","if_busy":"queue"}`)
	wantStorageRefusal(t, "POST", a.base+"/sessions/"+id+"/runs/"+runID+"/cancel", "")
	wantStorageRefusal(t, "POST", a.base+"/sessions", `{"agent":"long"}`)
	var run map[string]any
	getJSON(t, a.base+"/sessions/"+id+"/runs/"+runID, &run)
	if run["state"] != "running" {
		t.Fatalf("run = %v while its writes are refused, want running", run)
	}

	configSet("maxmemory", "0") // writes again
	waitRunState(t, a.base, id, runID, "succeeded")
	if !runEnded(seen[len(seen)-1]) {
		seen = append(seen, body.until(t, runEnded)...)
	}
	checkGapless(t, seen)
	if last := seen[len(seen)-1]; last.event != "RUN_FINISHED" {
		t.Fatalf("the run ended with %s %s, want RUN_FINISHED", last.event, last.data)
	}
	checkSameFrames(t, a.base, id, seen)
	log := eventLog(t, a.base, id)
	aguitest.VerifyJSON(t, asBytes(log))
	if got := answerOf(decodeLog(t, log)); got != longAnswer {
		t.Fatalf("the run answered %q, want the whole answer", got)
	}
	next := post(t, a.base+"/sessions/"+id+"/run", `{"input":"again"}`)["id"].(string)
	waitRunState(t, a.base, id, next, "succeeded")

	r.crash()
	pollUntil(t, "a refusal while Redis is away", func() bool {
		status, _, _ := send(t, "POST", a.base+"/sessions", `{"agent":"long"}`)
		if status != http.StatusCreated && status != http.StatusServiceUnavailable {
			t.Fatalf("POST /sessions while Redis is away = %d", status)
		}
		return status == http.StatusServiceUnavailable
	})
	wantStorageRefusal(t, "POST", a.base+"/sessions", `{"agent":"long"}`)
}

// send sends a request and returns its status, headers and body.
func send(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

// wantStorageRefusal sends a request and fails unless it is refused 503
// storage_unavailable with Retry-After.
func wantStorageRefusal(t *testing.T, method, url, body string) {
	t.Helper()
	status, header, b := send(t, method, url, body)
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p) // an undecodable body fails below
	if status != http.StatusServiceUnavailable || p.Code != "storage_unavailable" || header.Get("Retry-After") == "" {
		t.Fatalf("%s %s = %d %s (Retry-After %q), want 503 storage_unavailable with Retry-After",
			method, url, status, b, header.Get("Retry-After"))
	}
}
