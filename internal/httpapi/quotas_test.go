package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/quota"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Two tenants and an operator, for every quota test.
var (
	acmeKey     = []string{"Authorization", "Bearer k1"}
	otherKey    = []string{"Authorization", "Bearer k2"}
	operatorKey = []string{"Authorization", "Bearer op"}
)

// newQuotaServer returns a server whose tenants acme (k1) and other (k2)
// have limits, counted by lim (a fresh in-process limiter when nil).
func newQuotaServer(t *testing.T, limits quota.Limits, lim *quota.Limiter) *testServer {
	t.Helper()
	if lim == nil {
		lim = quota.New(quota.Options{Limits: limits})
		t.Cleanup(lim.Close)
	}
	return newServer(t, serverOptions{
		kernel: kerneltest.Options{Quotas: lim},
		api: httpapi.Options{
			APIKeys: map[string]string{"k1": "acme", "k2": "other"}, AdminKeys: []string{"op"},
			Quotas: lim, MaxStreamsPerTenant: 7,
		},
	})
}

// wantRefused checks a quota's refusal: status 429, code, the limit it
// names and a Retry-After of at least one second and at most maxRetry.
func wantRefused(t *testing.T, res response, code errdefs.Code, limit string, maxRetry time.Duration) {
	t.Helper()
	p := wantProblem(t, res, http.StatusTooManyRequests, string(code))
	if p["limit"] != limit {
		t.Errorf("limit = %v, want %s", p["limit"], limit)
	}
	secs, err := strconv.Atoi(res.header.Get("Retry-After"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > maxRetry {
		t.Errorf("Retry-After = %q, want 1 to %.0f seconds", res.header.Get("Retry-After"), maxRetry.Seconds())
	}
	if p["retry_after"] != float64(secs) {
		t.Errorf("retry_after = %v, want Retry-After's %d", p["retry_after"], secs)
	}
}

// TestQuotas_Requests: a tenant's requests take from its own token
// bucket; the bucket is advertised on every response, and an empty one
// answers 429 rate_limited with Retry-After. Operator keys have none.
func TestQuotas_Requests(t *testing.T) {
	// One request back every 100 s: the bucket cannot refill mid-test.
	ts := newQuotaServer(t, quota.Limits{RequestsPerSecond: 0.01, RequestBurst: 3}, nil)
	for i := 2; i >= 0; i-- {
		res := ts.do(t, "GET", "/agents", "", acmeKey...)
		if res.status != http.StatusOK {
			t.Fatalf("request %d = %d %s", 3-i, res.status, res.body)
		}
		wantHeader(t, res, "RateLimit-Policy", `"requests";q=3;w=300`)
		wantHeader(t, res, "RateLimit", `"requests";r=`+strconv.Itoa(i)+`;t=`+strconv.Itoa(100*(3-i)))
	}
	res := ts.do(t, "GET", "/sessions", "", acmeKey...)
	wantRefused(t, res, errdefs.CodeRateLimited, quota.LimitRequests, 100*time.Second)
	wantHeader(t, res, "RateLimit", `"requests";r=0;t=100`)
	wantHeader(t, res, "RateLimit-Policy", `"requests";q=3;w=300`)

	t.Run("TenantsHaveTheirOwnBucket", func(t *testing.T) {
		res := ts.do(t, "GET", "/agents", "", otherKey...)
		if res.status != http.StatusOK {
			t.Fatalf("other tenant = %d %s, want 200", res.status, res.body)
		}
		wantHeader(t, res, "RateLimit", `"requests";r=2;t=100`)
	})
	t.Run("OperatorsAreNoTenant", func(t *testing.T) {
		for range 5 {
			res := ts.do(t, "GET", "/readyz", "", operatorKey...)
			if res.status != http.StatusOK || res.header.Get("RateLimit") != "" {
				t.Fatalf("operator /readyz = %d with RateLimit %q, want 200 without", res.status, res.header.Get("RateLimit"))
			}
		}
	})
}

func wantHeader(t *testing.T, res response, name, want string) {
	t.Helper()
	if got := res.header.Get(name); got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

// TestQuotas_Sessions: a tenant stores at most max_sessions sessions;
// deleting one makes room. GET /usage shows the count and the limits.
func TestQuotas_Sessions(t *testing.T) {
	ts := newQuotaServer(t, quota.Limits{MaxSessions: 2}, nil)
	first := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)
	res := ts.do(t, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)
	wantRefused(t, res, errdefs.CodeQuotaExceeded, quota.LimitSessions, time.Minute)

	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, otherKey...)
	usage := ts.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)
	if u := usage["usage"].(map[string]any); u["sessions"] != float64(2) {
		t.Errorf("usage.sessions = %v, want 2", u["sessions"])
	}
	if l := usage["limits"].(map[string]any); l["max_sessions"] != float64(2) || l["max_streams"] != float64(7) {
		t.Errorf("limits = %v, want max_sessions 2, max_streams 7", l)
	}
	ts.must(t, http.StatusNoContent, "DELETE", "/sessions/"+first, "", acmeKey...)
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)
}

// TestQuotas_RunsPerMinute: a tenant starts at most runs_per_minute runs
// a minute; a request refused for another reason takes none.
func TestQuotas_RunsPerMinute(t *testing.T) {
	ts := newQuotaServer(t, quota.Limits{RunsPerMinute: 2}, nil)
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
	ts.must(t, http.StatusNotFound, "POST", "/sessions/0190d7a0-0000-7000-8000-000000000000/run", `{"input":"hi"}`, acmeKey...)
	for range 2 {
		runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
		ts.waitRunAs(t, id, runID, acmeKey)
	}
	if u := ts.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any); u["runs_available"] != float64(0) {
		t.Errorf("usage.runs_available = %v, want 0", u["runs_available"])
	}
	res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, acmeKey...)
	wantRefused(t, res, errdefs.CodeRateLimited, quota.LimitRunsPerMinute, 30*time.Second)

	other := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, otherKey...)["id"].(string)
	ts.must(t, http.StatusAccepted, "POST", "/sessions/"+other+"/run", `{"input":"hi"}`, otherKey...)
}

// TestQuotas_ConcurrentRuns: a tenant has at most max_concurrent_runs
// runs executing at once; one ending frees its place.
func TestQuotas_ConcurrentRuns(t *testing.T) {
	ts := newQuotaServer(t, quota.Limits{MaxConcurrentRuns: 1}, nil)
	waiting := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"waiter"}`, acmeKey...)["id"].(string)
	second := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
	runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+waiting+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
	<-ts.kernel.Wait.Started()

	res := ts.do(t, "POST", "/sessions/"+second+"/run", `{"input":"hi"}`, acmeKey...)
	wantRefused(t, res, errdefs.CodeQuotaExceeded, quota.LimitConcurrentRuns, 5*time.Second)
	if u := ts.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any); u["concurrent_runs"] != float64(1) {
		t.Errorf("usage.concurrent_runs = %v, want 1", u["concurrent_runs"])
	}
	other := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, otherKey...)["id"].(string)
	ts.must(t, http.StatusAccepted, "POST", "/sessions/"+other+"/run", `{"input":"hi"}`, otherKey...)

	ts.kernel.Wait.Release()
	ts.waitRunAs(t, waiting, runID, acmeKey)
	pollUntil(t, "the run's place to be free", func() bool {
		return ts.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any)["concurrent_runs"] == float64(0)
	})
	ts.must(t, http.StatusAccepted, "POST", "/sessions/"+second+"/run", `{"input":"hi"}`, acmeKey...)
}

// TestQuotas_TokensPerDay: the model call that spends the last of a
// tenant's tokens for the day stops its run, before its tool calls, with
// RUN_ERROR quota_exceeded; the tenant's next run is refused until the day
// turns. Another tenant's budget is its own.
func TestQuotas_TokensPerDay(t *testing.T) {
	ts := newQuotaServer(t, quota.Limits{TokensPerDay: 1}, nil)
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"looper"}`, acmeKey...)["id"].(string)
	runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
	ts.waitRunAs(t, id, runID, acmeKey)
	run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "", acmeKey...)
	if run["state"] != "failed" || run["error"].(map[string]any)["code"] != "quota_exceeded" {
		t.Fatalf("run = %v %v, want failed with quota_exceeded", run["state"], run["error"])
	}
	page, _ := ts.getEventPage(t, id, "?after=0&limit=200", acmeKey...)
	var last map[string]any
	turnText, toolErr := false, false
	for _, raw := range page.Data {
		last = nil
		if err := json.Unmarshal(raw, &last); err != nil {
			t.Fatal(err)
		}
		turnText = turnText || last["type"] == "TEXT_MESSAGE_CONTENT" && last["delta"] == "again"
		toolErr = toolErr || last["type"] == "TOOL_CALL_RESULT" && last["content"] == "error: the run ended before this tool call returned"
	}
	if last["type"] != "RUN_ERROR" || last["code"] != "quota_exceeded" || !turnText || !toolErr {
		t.Errorf("last event %v %v, model turn seen %v, tool call answered unrun %v; want RUN_ERROR quota_exceeded after the turn",
			last["type"], last["code"], turnText, toolErr)
	}
	usage := ts.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any)
	if spent, _ := usage["tokens_today"].(float64); spent < 1 {
		t.Errorf("usage.tokens_today = %v, want at least 1", usage["tokens_today"])
	}

	res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, acmeKey...)
	wantRefused(t, res, errdefs.CodeQuotaExceeded, quota.LimitTokensPerDay, 24*time.Hour)
	other := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, otherKey...)["id"].(string)
	ts.must(t, http.StatusAccepted, "POST", "/sessions/"+other+"/run", `{"input":"hi"}`, otherKey...)
}

// TestQuotas_Forks: a fork is a session stored, and a regenerate a
// session and a run, under the same quotas as the ones created directly.
func TestQuotas_Forks(t *testing.T) {
	ts := newQuotaServer(t, quota.Limits{MaxSessions: 2, RunsPerMinute: 1}, nil)
	id := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
	runID := ts.must(t, http.StatusAccepted, "POST", "/sessions/"+id+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
	ts.waitRunAs(t, id, runID, acmeKey)
	wantRefused(t, ts.do(t, "POST", "/sessions/"+id+"/runs/"+runID+"/regenerate", "", acmeKey...),
		errdefs.CodeRateLimited, quota.LimitRunsPerMinute, time.Minute)
	ts.must(t, http.StatusCreated, "POST", "/sessions/"+id+"/fork", "", acmeKey...)
	wantRefused(t, ts.do(t, "POST", "/sessions/"+id+"/fork", "", acmeKey...), errdefs.CodeQuotaExceeded, quota.LimitSessions, time.Minute)
}
