package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
)

// TestStreamLimits: event streams are capped per tenant (429
// too_many_streams) and in all (503 streams_unavailable), before any
// event is written and without starting the run a stream asked for;
// requests that do not stream are not counted; a closed stream frees its
// slot.
func TestStreamLimits(t *testing.T) {
	ts := newServer(t, serverOptions{api: httpapi.Options{
		APIKeys:    map[string]string{"k1": "acme", "k2": "other"},
		MaxStreams: 3, MaxStreamsPerTenant: 2,
	}})
	k1 := []string{"Authorization", "Bearer k1"}
	k2 := []string{"Authorization", "Bearer k2"}
	s1 := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k1...)["id"].(string)
	s2 := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, k2...)["id"].(string)
	events := func(id string) string { return "/sessions/" + id + "/events" }
	sse := []string{"Accept", "text/event-stream"}

	first := ts.openStream(t, "GET", events(s1), "", k1...)
	ts.openStream(t, "GET", events(s1), "", k1...)
	refused := func(res response, status int, code string) {
		t.Helper()
		wantProblem(t, res, status, code)
		if res.header.Get("Retry-After") == "" {
			t.Errorf("%d %s without Retry-After", status, code)
		}
	}
	t.Run("PerTenant", func(t *testing.T) {
		refused(ts.doWithin(t, 5*time.Second, "GET", events(s1), "", append(sse, k1...)...), http.StatusTooManyRequests, "too_many_streams")
		refused(ts.doWithin(t, 5*time.Second, "GET", events(s1), "", k1...), http.StatusTooManyRequests, "too_many_streams")
		res := ts.doWithin(t, 5*time.Second, "POST", "/sessions/"+s1+"/run", `{"input":"hi"}`, append(sse, k1...)...)
		refused(res, http.StatusTooManyRequests, "too_many_streams")
		if runs := ts.must(t, http.StatusOK, "GET", "/sessions/"+s1+"/runs", "", k1...)["data"].([]any); len(runs) != 0 {
			t.Errorf("a refused stream started %d runs, want none", len(runs))
		}
	})
	t.Run("NotStreamsAreNotCounted", func(t *testing.T) {
		ts.must(t, http.StatusOK, "GET", events(s1), "", append([]string{"Accept", "application/json"}, k1...)...)
		runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+s1+"/run", `{"input":"hi"}`, k1...)["id"].(string)
		ts.waitRunAs(t, s1, runID, k1)
	})
	t.Run("Total", func(t *testing.T) {
		ts.openStream(t, "GET", events(s2), "", k2...) // the third in all
		refused(ts.doWithin(t, 5*time.Second, "GET", events(s2), "", k2...), http.StatusServiceUnavailable, "streams_unavailable")
		res := ts.doWithin(t, 5*time.Second, "POST", "/sessions/"+s2+"/run", `{"input":"hi"}`, append(sse, k2...)...)
		refused(res, http.StatusServiceUnavailable, "streams_unavailable")
	})
	t.Run("Released", func(t *testing.T) {
		first.close()
		pollUntil(t, "the closed stream's slot to free", func() bool {
			return ts.doWithin(t, 5*time.Second, "GET", events(s1)+"?after=999", "", k1...).status != http.StatusTooManyRequests
		})
		s := ts.openStream(t, "POST", "/sessions/"+s1+"/run", `{"input":"hi"}`, append([]string{"Content-Type", "application/json"}, k1...)...)
		if frames := s.events(t, runEnded); len(frames) == 0 || !runEnded(frames[len(frames)-1]) {
			t.Errorf("the run's stream = %+v, want it to the run's end", frames)
		}
	})
}

// TestBodyPace: a request body slower than MinBodyRate after the grace
// is cut off with 408 body_too_slow (and Connection: close), while one
// sent at once is served; the answer matches the spec.
func TestBodyPace(t *testing.T) {
	const grace = 300 * time.Millisecond
	ts := newServer(t, serverOptions{api: httpapi.Options{MinBodyRate: 100, BodyRateGrace: grace, ReadTimeout: 5 * time.Second}})
	id := ts.createSession(t, "echo")
	for _, route := range []struct{ method, path string }{
		{"POST", "/sessions"}, {"POST", "/sessions/" + id + "/run"}, {"PATCH", "/sessions/" + id},
		{"PUT", "/sessions/" + id + "/memory/k"},
	} {
		t.Run(route.method+" "+route.path, func(t *testing.T) {
			c, err := net.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			_, err = io.WriteString(c, route.method+" "+route.path+" HTTP/1.1\r\nHost: kerneld\r\n"+
				"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{")
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(start.Add(5 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			defer res.Body.Close()
			took := time.Since(start)
			var p struct{ Code string }
			_ = json.NewDecoder(res.Body).Decode(&p)
			if res.StatusCode != http.StatusRequestTimeout || p.Code != "body_too_slow" || !res.Close {
				t.Fatalf("stalled body = %d %q close=%v, want 408 body_too_slow with Connection: close", res.StatusCode, p.Code, res.Close)
			}
			if took < grace || took > grace+2*time.Second {
				t.Errorf("cut off after %s, want soon after the %s grace", took, grace)
			}
		})
	}
	t.Run("FastBody", func(t *testing.T) {
		ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","name":"`+strings.Repeat("n", 100)+`"}`)
	})
}
