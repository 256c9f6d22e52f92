package main

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestProcess_RedisLosesSessions restarts a Redis that keeps nothing on
// disk (appendonly no) under kerneld while a client follows a session's
// stream: the restart loses the session, which then answers 404, and the
// stream must end as a deleted session's stream ends, not send pings for
// ever; the client's reconnect gets 204, which stops an EventSource.
func TestProcess_RedisLosesSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	r := startVolatileRedis(t)
	p := startOnRedis(t, r.url(), "  heartbeat: 200ms\n")
	id := post(t, p.base+"/sessions", `{"agent":"echo"}`)["id"].(string)
	post(t, p.base+"/sessions/"+id+"/run", `{"input":"hello"}`)
	st := stream(t, p.base, id, 0)
	defer st.Close()
	seen := st.until(t, runEnded)

	r.crash()
	r.start()
	pollUntil(t, "kerneld to reach the restarted Redis", func() bool { return readyStatus(t, p.base) == http.StatusOK })
	if status, _ := request(t, "GET", p.base+"/sessions/"+id, ""); status != http.StatusNotFound {
		t.Fatalf("GET the session after Redis restarted empty = %d, want 404", status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, st.r) // pings until kerneld ends the stream
		ended <- err
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the stream of the lost session ended with %v, want a clean end", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the stream of a session Redis lost is still open 15 s after kerneld reached Redis again")
	}
	again := streamStatus(t, p.base, id, seen[len(seen)-1].id)
	if again != http.StatusNoContent {
		t.Fatalf("reconnecting to the lost session's stream = %d, want 204", again)
	}
}

// startOnRedis runs the kerneld binary on the redis store at url with the
// given http: settings (YAML lines under "http:") and the repository's
// agents, and waits until it is ready.
func startOnRedis(t *testing.T, url, httpYAML string) *process {
	t.Helper()
	cfg := writeFile(t, t.TempDir(), "kerneld.yaml", "http:\n  addr: 127.0.0.1:0\n"+httpYAML)
	return startBinary(t, "-config", cfg, "-agents-dir", "../../configs/agents", "-store", "redis", "-redis-url", url)
}

// streamStatus returns the status a reconnect to the session's stream
// after seq gets, reading no further than the headers.
func streamStatus(t *testing.T, base, id string, after int64) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/sessions/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
