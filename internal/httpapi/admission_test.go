package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// admissionStores are the stores every admission test runs on; redis is
// skipped without a Redis server (and fails under KERNELD_REQUIRE_REDIS=1).
var admissionStores = []string{"memory", "sqlite", "redis"}

// newAdmissionServer returns a quota server on a fresh store of the named
// kind; on redis the quota counters are the store's, as a replica keeps
// them.
func newAdmissionServer(t *testing.T, kind string, limits quota.Limits) *testServer {
	t.Helper()
	var st kernel.Store
	opts := quota.Options{Limits: limits}
	if kind == "redis" {
		srv := redistest.Use(t)
		rdb, err := redis.Open(t.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		st, opts.Backend = rdb, rdb.Quotas("a", 15*time.Second)
	} else {
		st = openStore(t, kind)
	}
	lim := quota.New(opts)
	t.Cleanup(lim.Close)
	return newServer(t, serverOptions{
		kernel: kerneltest.Options{Quotas: lim, Store: st},
		api: httpapi.Options{
			APIKeys: map[string]string{"k1": "acme", "k2": "other"}, AdminKeys: []string{"op"},
			Quotas: lim, MaxStreamsPerTenant: 100,
		},
	})
}

// creation is one request that creates a session or a run.
type creation struct {
	name, method, path, body string
}

// post sends c as tenant acme from any goroutine and returns the status
// and the problem's code and limit, if any.
func (ts *testServer) post(c creation) (status int, body string, err error) {
	req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// storedSessions is acme's count of sessions, as GET /usage gives it.
func (ts *testServer) storedSessions(t *testing.T) int {
	t.Helper()
	return int(ts.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any)["sessions"].(float64))
}

// TestAdmission_SessionPaths: at max_sessions every way to create a
// session is refused alike (429 quota_exceeded naming max_sessions, with
// Retry-After), and the tenant stores no more: POST /sessions, POST /run
// and the AG-UI and AI SDK routes with a new id, fork, regenerate, and
// spawn_agent's child.
func TestAdmission_SessionPaths(t *testing.T) {
	for _, kind := range admissionStores {
		t.Run(kind, func(t *testing.T) {
			ts := newAdmissionServer(t, kind, quota.Limits{MaxSessions: 2})
			src := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
			runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+src+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
			ts.waitRunAs(t, src, runID, acmeKey)
			parent := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"delegator"}`, acmeKey...)["id"].(string)

			for _, c := range []creation{
				{"Sessions", "POST", "/sessions", `{"agent":"echo"}`},
				{"OneCall", "POST", "/run", `{"agent":"echo","input":"hi","session_id":"new-1"}`},
				{"AGUI", "POST", "/agents/echo/agui", aguiBody(t, "new-2", "r1", userMsg("u1", "hi"))},
				{"AISDK", "POST", "/agents/echo/ai-sdk", chatBody(t, "new-3", "submit-message", uiUser("u1", "hi"))},
				{"Fork", "POST", "/sessions/" + src + "/fork", ""},
				{"Regenerate", "POST", "/sessions/" + src + "/runs/" + runID + "/regenerate", ""},
			} {
				res := ts.do(t, c.method, c.path, c.body, acmeKey...)
				t.Run(c.name, func(t *testing.T) {
					wantRefused(t, res, errdefs.CodeQuotaExceeded, quota.LimitSessions, time.Minute)
				})
			}

			// The child a run spawns is refused too: the tool call answers
			// the model with the refusal, and no child is stored.
			spawner := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+parent+"/run", `{"input":"go"}`, acmeKey...)["id"].(string)
			ts.waitRunAs(t, parent, spawner, acmeKey)
			page, _ := ts.getEventPage(t, parent, "?after=0&limit=200", acmeKey...)
			if !strings.Contains(string(joinRaw(page.Data)), "delete some first") {
				t.Errorf("the spawn_agent call's result does not carry the refusal: %s", joinRaw(page.Data))
			}
			if n := ts.storedSessions(t); n != 2 {
				t.Errorf("stored sessions = %d, want 2", n)
			}
		})
	}
}

// TestAdmission_LastSessionRace: creations racing for the last places by
// every route that creates a session get one place each.
func TestAdmission_LastSessionRace(t *testing.T) {
	for _, kind := range admissionStores {
		t.Run(kind, func(t *testing.T) {
			ts := newAdmissionServer(t, kind, quota.Limits{MaxSessions: 3})
			ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)
			var cs []creation
			for i := range 3 {
				cs = append(cs,
					creation{"Sessions", "POST", "/sessions", `{"agent":"echo"}`},
					creation{"OneCall", "POST", "/run", fmt.Sprintf(`{"agent":"echo","input":"hi","session_id":"run-%d"}`, i)},
					creation{"AGUI", "POST", "/agents/echo/agui", aguiBody(t, fmt.Sprintf("agui-%d", i), "r1", userMsg("u1", "hi"))},
				)
			}
			admitted, refused := race(t, ts, cs)
			if admitted != 2 || refused != len(cs)-2 {
				t.Errorf("admitted %d, refused %d; want 2 and %d", admitted, refused, len(cs)-2)
			}
			if n := ts.storedSessions(t); n != 3 {
				t.Errorf("stored sessions = %d, want 3", n)
			}
		})
	}
}

// race sends every creation at once and counts those admitted (2xx) and
// those refused by a quota (429 quota_exceeded); anything else fails t.
func race(t *testing.T, ts *testServer, cs []creation) (admitted, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range cs {
		wg.Go(func() {
			<-start
			status, body, err := ts.post(c)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("%s: %v", c.name, err)
			case status/100 == 2:
				admitted++
			case status == http.StatusTooManyRequests && strings.Contains(body, `"quota_exceeded"`):
				refused++
			default:
				t.Errorf("%s = %d %s", c.name, status, body)
			}
		})
	}
	close(start)
	wg.Wait()
	return admitted, refused
}

// TestAdmission_RunPaths: with the tenant's concurrent runs all taken,
// every way to start a run is refused alike (429 quota_exceeded naming
// max_concurrent_runs, with Retry-After): POST /sessions/{id}/run, POST
// /run, the AG-UI and AI SDK routes, regenerate and compaction; a run
// posted to a busy session waits in its queue instead, and starts once a
// place is free.
func TestAdmission_RunPaths(t *testing.T) {
	for _, kind := range admissionStores {
		t.Run(kind, func(t *testing.T) {
			ts := newAdmissionServer(t, kind, quota.Limits{MaxConcurrentRuns: 1})
			ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo","id":"e1"}`, acmeKey...)
			runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/e1/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
			ts.waitRunAs(t, "e1", runID, acmeKey)
			stored := ts.storedSessions(t)

			waiting := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"waiter"}`, acmeKey...)["id"].(string)
			first := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+waiting+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
			<-ts.kernel.Wait.Started()

			for _, c := range []creation{
				{"SessionRun", "POST", "/sessions/e1/run", `{"input":"hi"}`},
				{"OneCall", "POST", "/run", `{"agent":"echo","input":"hi","session_id":"e1"}`},
				{"AGUI", "POST", "/agents/echo/agui", aguiBody(t, "e1", "r2", userMsg("u2", "hi"))},
				{"AISDK", "POST", "/agents/echo/ai-sdk", chatBody(t, "c1", "submit-message", uiUser("u1", "hi"))},
				{"Regenerate", "POST", "/sessions/e1/runs/" + runID + "/regenerate", ""},
				{"Compact", "POST", "/sessions/e1/compact", ""},
			} {
				res := ts.do(t, c.method, c.path, c.body, acmeKey...)
				t.Run(c.name, func(t *testing.T) {
					wantRefused(t, res, errdefs.CodeQuotaExceeded, quota.LimitConcurrentRuns, 5*time.Second)
				})
			}
			// The waiter's session and the AI SDK's new chat, whose first
			// message was refused; a refused regenerate keeps no fork.
			if n := ts.storedSessions(t); n != stored+2 {
				t.Errorf("stored sessions = %d, want %d", n, stored+2)
			}

			queued := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+waiting+"/run", `{"input":"next","if_busy":"queue"}`, acmeKey...)
			if queued["state"] != "queued" {
				t.Fatalf("a run posted to the busy session = %v, want queued", queued["state"])
			}
			ts.kernel.Wait.Release()
			ts.waitRunAs(t, waiting, first, acmeKey)
			ts.waitRunAs(t, waiting, queued["id"].(string), acmeKey)
		})
	}
}

// TestAdmission_LastRunRace: runs racing for the last concurrent places
// get one place each.
func TestAdmission_LastRunRace(t *testing.T) {
	for _, kind := range admissionStores {
		t.Run(kind, func(t *testing.T) {
			ts := newAdmissionServer(t, kind, quota.Limits{MaxConcurrentRuns: 2})
			var cs []creation
			for i := range 6 {
				id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"waiter"}`, acmeKey...)["id"].(string)
				c := creation{"SessionRun", "POST", "/sessions/" + id + "/run", `{"input":"hi"}`}
				if i%2 == 1 {
					c = creation{"OneCall", "POST", "/run", `{"agent":"waiter","input":"hi","session_id":"` + id + `"}`}
				}
				cs = append(cs, c)
			}
			admitted, refused := race(t, ts, cs)
			if admitted != 2 || refused != 4 {
				t.Errorf("admitted %d, refused %d; want 2 and 4", admitted, refused)
			}
			ts.kernel.Wait.Release()
		})
	}
}

// TestAdmission_SpawnedChildRun: a spawned child's run is admitted like
// any other: with the tenant's concurrent runs taken by its parent and
// another run, the child is refused and the parent's model hears why.
func TestAdmission_SpawnedChildRun(t *testing.T) {
	ts := newAdmissionServer(t, "memory", quota.Limits{MaxConcurrentRuns: 2})
	waiting := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"waiter"}`, acmeKey...)["id"].(string)
	ts.must(t, http.StatusAccepted, "POST", "/sessions/"+waiting+"/run", `{"input":"hi"}`, acmeKey...)
	<-ts.kernel.Wait.Started()
	parent := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"delegator"}`, acmeKey...)["id"].(string)
	runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+parent+"/run", `{"input":"go"}`, acmeKey...)["id"].(string)
	ts.waitRunAs(t, parent, runID, acmeKey)
	page, _ := ts.getEventPage(t, parent, "?after=0&limit=200", acmeKey...)
	if !strings.Contains(string(joinRaw(page.Data)), "runs executing or starting") {
		t.Errorf("the spawn_agent call's result does not carry the refusal: %s", joinRaw(page.Data))
	}
	ts.kernel.Wait.Release()
}

// joinRaw joins a page's events, to look for text in any of them.
func joinRaw(data []json.RawMessage) []byte {
	var b bytes.Buffer
	for _, d := range data {
		b.Write(d)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
