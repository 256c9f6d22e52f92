package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
)

// TestCluster_PostgresDropsConnections terminates every connection two
// replicas hold to their database while one runs a session and the other
// streams it, as a Postgres failover or a pooler restart does: the run
// must go on to its end, the stream on the other replica (whose listener
// lost its connection too) must stay gapless, and both replicas must
// serve the same log.
func TestCluster_PostgresDropsConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	db := pgtest.Database(t)
	cl := newCluster(t, sharedStore{args: []string{"-store", "postgres", "-postgres-url", db}})
	a, b := cl.start("a"), cl.start("b")
	id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
	runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
	body := stream(t, b.base, id, 0)
	defer body.Close()
	seen := body.until(t, func(f sseFrame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id >= 10 })
	if n := terminateBackends(t, db); n == 0 {
		t.Fatal("no connection of the replicas was terminated")
	}
	cut := time.Now()
	seen = append(seen, body.until(t, runEnded)...)
	t.Logf("the run ended %v after its connections were terminated", time.Since(cut).Round(time.Millisecond))
	checkGapless(t, seen)
	if last := seen[len(seen)-1]; last.event != "RUN_FINISHED" {
		t.Fatalf("the run ended with %s %s", last.event, last.data)
	}
	waitRunState(t, a.base, id, runID, "succeeded")
	checkSameFrames(t, a.base, id, seen)
}

// terminateBackends ends every other connection to the database at u and
// returns how many it ended.
func terminateBackends(t *testing.T, u string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	err = conn.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()) AS ended`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
