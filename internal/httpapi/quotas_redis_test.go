package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// newReplicaPair returns two servers, replicas a and b, whose quotas are
// counted in one Redis, as replicas sharing the redis store count them.
func newReplicaPair(t *testing.T, limits quota.Limits) (a, b *testServer) {
	t.Helper()
	srv := redistest.Use(t)
	st, err := redis.Open(t.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	replica := func(name string) *testServer {
		lim := quota.New(quota.Options{Limits: limits, Backend: st.Quotas(name, 15*time.Second)})
		t.Cleanup(lim.Close)
		return newQuotaServer(t, limits, lim)
	}
	return replica("a"), replica("b")
}

// TestQuotas_AcrossReplicas: with the counters in Redis, a tenant's limits
// hold across replicas: what it used on one counts on the other, and
// tenants still have buckets of their own.
func TestQuotas_AcrossReplicas(t *testing.T) {
	redistest.Require(t)
	t.Run("Requests", func(t *testing.T) {
		a, b := newReplicaPair(t, quota.Limits{RequestsPerSecond: 0.01, RequestBurst: 2})
		a.must(t, http.StatusOK, "GET", "/agents", "", acmeKey...)
		res := b.do(t, "GET", "/agents", "", acmeKey...)
		wantHeader(t, res, "RateLimit", `"requests";r=0;t=200`)
		wantRefused(t, a.do(t, "GET", "/agents", "", acmeKey...), errdefs.CodeRateLimited, quota.LimitRequests, 100*time.Second)
		b.must(t, http.StatusOK, "GET", "/agents", "", otherKey...)
	})
	t.Run("RunsPerMinute", func(t *testing.T) {
		a, b := newReplicaPair(t, quota.Limits{RunsPerMinute: 2})
		sa := a.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
		sb := b.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
		a.must(t, http.StatusAccepted, "POST", "/sessions/"+sa+"/run", `{"input":"hi"}`, acmeKey...)
		b.must(t, http.StatusAccepted, "POST", "/sessions/"+sb+"/run", `{"input":"hi"}`, acmeKey...)
		wantRefused(t, a.do(t, "POST", "/sessions/"+sa+"/run", `{"input":"hi","if_busy":"queue"}`, acmeKey...),
			errdefs.CodeRateLimited, quota.LimitRunsPerMinute, 30*time.Second)
	})
	t.Run("ConcurrentRuns", func(t *testing.T) {
		a, b := newReplicaPair(t, quota.Limits{MaxConcurrentRuns: 1})
		sa := a.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"waiter"}`, acmeKey...)["id"].(string)
		sb := b.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
		runID := a.must(t, http.StatusAccepted, "POST", "/sessions/"+sa+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
		<-a.kernel.Wait.Started()
		wantRefused(t, b.do(t, "POST", "/sessions/"+sb+"/run", `{"input":"hi"}`, acmeKey...),
			errdefs.CodeQuotaExceeded, quota.LimitConcurrentRuns, 5*time.Second)
		if u := b.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any); u["concurrent_runs"] != float64(1) {
			t.Errorf("usage.concurrent_runs on the other replica = %v, want 1", u["concurrent_runs"])
		}
		a.kernel.Wait.Release()
		a.waitRunAs(t, sa, runID, acmeKey)
		pollUntil(t, "the run's place to be free on the other replica", func() bool {
			return b.must(t, http.StatusOK, "GET", "/usage", "", acmeKey...)["usage"].(map[string]any)["concurrent_runs"] == float64(0)
		})
		b.must(t, http.StatusAccepted, "POST", "/sessions/"+sb+"/run", `{"input":"hi"}`, acmeKey...)
	})
	t.Run("TokensPerDay", func(t *testing.T) {
		a, b := newReplicaPair(t, quota.Limits{TokensPerDay: 1})
		sa := a.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
		sb := b.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, acmeKey...)["id"].(string)
		runID := a.must(t, http.StatusAccepted, "POST", "/sessions/"+sa+"/run", `{"input":"hi"}`, acmeKey...)["id"].(string)
		a.waitRunAs(t, sa, runID, acmeKey)
		wantRefused(t, b.do(t, "POST", "/sessions/"+sb+"/run", `{"input":"hi"}`, acmeKey...),
			errdefs.CodeQuotaExceeded, quota.LimitTokensPerDay, 24*time.Hour)
		b.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`, otherKey...)
	})
}
