package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
)

// TestCluster_PostgresRestart crashes PostgreSQL mid-run (an immediate
// shutdown, so recovery at the next start) and starts it again about two
// seconds later, as TestCluster_RedisOutage does Redis: /readyz says 503
// while it is away and 200 after, the run pauses and goes on to its whole
// answer, and nothing a client saw is lost or changed.
func TestCluster_PostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	srv := pgtest.StartServer(t)
	cl := newCluster(t, sharedStore{args: []string{"-store", "postgres", "-postgres-url", srv.URL()}})
	a, b := cl.start("a"), cl.start("b")

	id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
	runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
	body := stream(t, a.base, id, 0)
	seen := body.until(t, func(f sseFrame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id >= 10 })
	body.Close()
	srv.Crash()
	down := time.Now()
	pollUntil(t, "/readyz to fail while Postgres is away", func() bool {
		return readyStatus(t, a.base) == http.StatusServiceUnavailable && readyStatus(t, b.base) == http.StatusServiceUnavailable
	})
	pollUntil(t, "the owner to notice", func() bool {
		return strings.Contains(a.logs.String(), "the store refused a run's events")
	})
	time.Sleep(time.Until(down.Add(2 * time.Second))) // Postgres stays away about two seconds, as a restart does
	srv.Start()
	t.Logf("Postgres was away %v", time.Since(down).Round(time.Millisecond))
	pollUntil(t, "/readyz to pass again", func() bool {
		return readyStatus(t, a.base) == http.StatusOK && readyStatus(t, b.base) == http.StatusOK
	})
	waitRunState(t, b.base, id, runID, "succeeded")
	checkSameFrames(t, b.base, id, seen)
	log := eventLog(t, b.base, id)
	aguitest.VerifyJSON(t, asBytes(log))
	assert.Equal(t, longAnswer, answerOf(decodeLog(t, log)))
	next := post(t, b.base+"/sessions/"+id+"/run", `{"input":"again"}`)
	if next["start_seq"].(float64) != float64(len(log)+1) {
		t.Fatalf("next run starts at seq %v, want %d", next["start_seq"], len(log)+1)
	}
}

// pgMaxConnections is the connections the private server of
// TestCluster_PostgresFewConnections allows: two replicas of
// pgReplicaConns each, plus their listeners, fill all but two.
const (
	pgMaxConnections = 12
	pgReplicaConns   = 4
)

// TestCluster_PostgresFewConnections runs two replicas on a PostgreSQL
// with a small max_connections, their pools sized to fit (replicas ×
// (pool + 1 listener) ≤ max_connections, as the README says), and sends
// them far more concurrent sessions and runs than they have connections:
// the requests queue on the pools, so every one succeeds and every run's
// log is whole. Then another client takes every connection left, so a
// replica that wants one more cannot have it: a request may be refused,
// but only with 503 storage_unavailable and Retry-After, and everything
// acknowledged is there, every accepted run finished, once the client
// lets go.
func TestCluster_PostgresFewConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	srv := pgtest.StartServer(t, fmt.Sprintf("max_connections=%d", pgMaxConnections), "superuser_reserved_connections=0")
	cl := newCluster(t, sharedStore{
		args: []string{"-store", "postgres", "-postgres-url", srv.URL()},
		env:  []string{fmt.Sprintf("KERNELD_POSTGRES_MAX_CONNS=%d", pgReplicaConns)},
	})
	replicas := []*process{cl.start("a"), cl.start("b")}

	t.Run("pools sized to fit", func(t *testing.T) {
		results := burst(replicas, 16)
		for _, r := range results {
			if r.err != nil {
				t.Errorf("session %d: %v", r.n, r.err)
			}
		}
		checkRuns(t, replicas, results)
	})

	t.Run("connections taken by another client", func(t *testing.T) {
		hog := hogConnections(t, srv.URL(), 3)
		t.Logf("another client holds %d connections, the replicas have 3 between them", len(hog))
		results := burst(replicas, 16)
		refused := 0
		for _, r := range results {
			switch {
			case r.err == nil:
			case errors.Is(r.err, errRefused):
				refused++
			default:
				t.Errorf("session %d: %v", r.n, r.err)
			}
		}
		t.Logf("%d of %d sessions refused a request with 503 storage_unavailable", refused, len(results))
		for _, c := range hog {
			_ = c.Close(context.Background())
		}
		checkRuns(t, replicas, results)
	})
}

// errRefused is a request refused with 503 storage_unavailable and
// Retry-After: the bounded error the store may answer.
var errRefused = errors.New("refused with 503 storage_unavailable")

// burstResult is what burst did for one session: the replica and ids of
// what was acknowledged, or the error that stopped it.
type burstResult struct {
	n         int
	base      string
	id, runID string
	err       error
}

// burst creates n sessions at once, spread over replicas, and starts a
// run on each.
func burst(replicas []*process, n int) []burstResult {
	results := make([]burstResult, n)
	var wg sync.WaitGroup
	for i := range results {
		r := &results[i]
		r.n, r.base = i, replicas[i%len(replicas)].base
		wg.Go(func() {
			var sess, run struct{ ID string }
			if r.err = call(r.base+"/sessions", `{"agent":"steady"}`, &sess); r.err != nil {
				return
			}
			r.id = sess.ID
			if r.err = call(r.base+"/sessions/"+r.id+"/run", `{"input":"go"}`, &run); r.err != nil {
				return
			}
			r.runID = run.ID
		})
	}
	wg.Wait()
	return results
}

// call POSTs body to url and decodes a 2xx answer into out. A 503
// storage_unavailable with Retry-After is errRefused; any other failure is
// an error saying what came back.
func call(url, body string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 == 2 {
		return json.Unmarshal(b, out)
	}
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	if res.StatusCode == http.StatusServiceUnavailable && p.Code == "storage_unavailable" && res.Header.Get("Retry-After") != "" {
		return errRefused
	}
	return fmt.Errorf("POST %s = %d %s", url, res.StatusCode, b)
}

// checkRuns waits for every run burst started to succeed and checks that
// each acknowledged session and run is there, on every replica, with a
// gapless log that ends its run.
func checkRuns(t *testing.T, replicas []*process, results []burstResult) {
	t.Helper()
	for _, r := range results {
		if r.id == "" {
			continue
		}
		for _, p := range replicas {
			if status, _ := request(t, "GET", p.base+"/sessions/"+r.id, ""); status != http.StatusOK {
				t.Fatalf("session %s, acknowledged by %s, is %d on %s", r.id, r.base, status, p.base)
			}
		}
		if r.runID == "" {
			continue
		}
		waitRunState(t, r.base, r.id, r.runID, "succeeded")
		body := stream(t, replicas[(r.n+1)%len(replicas)].base, r.id, 0)
		frames := body.until(t, runEnded)
		body.Close()
		checkGapless(t, frames)
		if last := frames[len(frames)-1]; last.event != "RUN_FINISHED" {
			t.Fatalf("session %s: the run ended with %s %s", r.id, last.event, last.data)
		}
	}
}

// hogConnections ends the replicas' connections to the server at u, then
// opens connections until it refuses one for having too many, and closes
// leave of them again: the replicas, whose pools had grown, must now make
// do with leave connections between them (their listeners included). It
// returns those it holds; they are closed when t ends.
func hogConnections(t *testing.T, u string, leave int) []*pgx.Conn {
	t.Helper()
	var conns []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	})
	connect := func() (*pgx.Conn, bool) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, u)
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "53300" {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return c, true
	}
	first, ok := connect()
	if !ok {
		t.Fatal("the server has no connection left for the test")
	}
	conns = append(conns, first)
	if _, err := first.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kerneld'`); err != nil {
		t.Fatal(err)
	}
	for len(conns) <= pgMaxConnections {
		c, ok := connect()
		if !ok {
			break
		}
		conns = append(conns, c)
	}
	if len(conns) < leave {
		t.Fatalf("the test holds only %d connections, cannot leave %d", len(conns), leave)
	}
	for _, c := range conns[len(conns)-leave:] {
		_ = c.Close(context.Background())
	}
	conns = conns[:len(conns)-leave]
	return conns
}
