package main

import (
	"net/http"
	"testing"
)

// TestCluster_QuotasShared: replicas on one shared store count a tenant's
// runs together: with one run a minute, the run started on A leaves none
// for B.
func TestCluster_QuotasShared(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, store sharedStore) {
		c := newCluster(t, store)
		c.env = append(c.env, "KERNELD_RUNS_PER_MINUTE=1")
		a, b := c.start("a"), c.start("b")
		first := post(t, a.base+"/sessions", `{"agent":"steady"}`)["id"].(string)
		second := post(t, b.base+"/sessions", `{"agent":"steady"}`)["id"].(string)
		if status, body := request(t, "POST", a.base+"/sessions/"+first+"/run", `{"input":"one"}`); status >= 300 {
			t.Fatalf("the first run on A = %d %v", status, body)
		}
		status, body := request(t, "POST", b.base+"/sessions/"+second+"/run", `{"input":"two"}`)
		if status != http.StatusTooManyRequests || body["code"] != "rate_limited" {
			t.Fatalf("a second run on B = %d %v, want 429 rate_limited: the replicas share the count", status, body)
		}
	})
}
