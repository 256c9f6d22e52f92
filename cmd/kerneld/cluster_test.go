package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// The agents of the cluster tests.
const (
	// steadyAgent answers in about half a second, for queues.
	steadyAgent = `
name: steady
model:
  provider: scripted
  token_delay: 20ms
  script:
    - {text: "one two three four five six seven eight nine ten eleven twelve"}
`
	// longAgent streams for several seconds, for outages mid-run.
	longAgent = `
name: long
model:
  provider: scripted
  token_delay: 25ms
  script:
    - {text: "` + longAnswer + `"}
`
	// askingAgent asks before it looks at the clock.
	askingAgent = `
name: asking
model:
  provider: scripted
  script:
    - {text: "May I look?", tool_calls: [{name: current_time, arguments: {timezone: UTC}}]}
    - {text: "Looked."}
tools: [{name: current_time, require_approval: true}]
approval_timeout: 10m
`
)

// longAnswer is what longAgent says.
const longAnswer = "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z " +
	"a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z " +
	"a b c d e f g h i j k l m n o p q r s t u v w x y z"

// clusterLeaseTTL is the cluster tests' lease: short, so take-overs are
// quick, and long enough for a loaded machine to renew in time.
const clusterLeaseTTL = 2 * time.Second

// cluster is kerneld replicas sharing one store, run from the binary.
type cluster struct {
	t         *testing.T
	bin       string
	agentsDir string
	store     sharedStore
	env       []string // added to each replica's environment
}

// sharedStore is a store several replicas share: the flags and the
// environment that point a replica at it.
type sharedStore struct {
	args []string
	env  []string
}

// redisStore is the Redis at url, under key prefix.
func redisStore(url, prefix string) sharedStore {
	return sharedStore{args: []string{"-store", "redis", "-redis-url", url}, env: []string{"KERNELD_REDIS_PREFIX=" + prefix}}
}

// testRedis is the test server's Redis, under a prefix of t's own.
func testRedis(t *testing.T) sharedStore {
	srv := redistest.Use(t)
	return redisStore(srv.URL, srv.Prefix)
}

// testPostgres is a database of t's own on the test server's Postgres.
func testPostgres(t *testing.T) sharedStore {
	return sharedStore{args: []string{"-store", "postgres", "-postgres-url", pgtest.Database(t)}}
}

// eachSharedStore runs test as a subtest for each store replicas can
// share: whatever DESIGN.md §8 promises holds on each.
func eachSharedStore(t *testing.T, test func(t *testing.T, store sharedStore)) {
	for name, open := range map[string]func(*testing.T) sharedStore{"redis": testRedis, "postgres": testPostgres} {
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

func newCluster(t *testing.T, store sharedStore) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: buildBinary(t), agentsDir: t.TempDir(), store: store}
	for name, def := range map[string]string{"paced": pacedAgent, "steady": steadyAgent, "long": longAgent, "asking": askingAgent} {
		writeFile(t, c.agentsDir, name+".yaml", def)
	}
	return c
}

// start starts replica name and waits until it is ready.
func (c *cluster) start(name string) *process {
	c.t.Helper()
	p := &process{logs: &syncBuffer{}}
	p.cmd = exec.Command(c.bin, append([]string{"-addr", "127.0.0.1:0", "-config", "../../configs/kerneld.yaml",
		"-agents-dir", c.agentsDir, "-replica", name}, c.store.args...)...)
	p.cmd.Env = append(append(os.Environ(), c.store.env...), "KERNELD_LEASE_TTL="+clusterLeaseTTL.String())
	p.cmd.Env = append(p.cmd.Env, c.env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot die
		p.stop()
		if c.t.Failed() {
			c.t.Logf("replica %s logs:\n%s", name, p.logs.String())
		}
	})
	p.base = "http://" + waitAddr(c.t, p.logs.String)
	waitReady(c.t, p.base)
	return p
}

// startAll starts replicas a, b and c.
func (c *cluster) startAll() (a, b, cc *process) {
	return c.start("a"), c.start("b"), c.start("c")
}

// request sends a JSON request and decodes the JSON answer.
func request(t *testing.T, method, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	if res.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			t.Fatalf("%s %s = %d, undecodable: %v", method, url, res.StatusCode, err)
		}
	}
	return res.StatusCode, m
}

// sseStream is an open event stream, read frame by frame across calls.
type sseStream struct {
	r    *bufio.Reader
	body io.Closer
}

// until reads frames until stop returns true.
func (s *sseStream) until(t *testing.T, stop func(sseFrame) bool) []sseFrame {
	t.Helper()
	return readUntil(t, s.r, stop)
}

func (s *sseStream) Close() { s.body.Close() }

// stream opens the session's event stream at base after seq.
func stream(t *testing.T, base, id string, after int64) *sseStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/sessions/"+id+"/events", nil)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/sessions/%s/events = %d", base, id, res.StatusCode)
	}
	return &sseStream{r: bufio.NewReader(res.Body), body: res.Body}
}

// runEnded reports whether f ends a run.
func runEnded(f sseFrame) bool { return f.event == "RUN_FINISHED" || f.event == "RUN_ERROR" }

// checkGapless fails unless frames carry seqs 1, 2, 3, … in order.
func checkGapless(t *testing.T, frames []sseFrame) {
	t.Helper()
	for i, f := range frames {
		if f.id != int64(i+1) {
			t.Fatalf("frame %d has id %d, want %d: the stream has a gap or a duplicate", i, f.id, i+1)
		}
	}
}

// runStarts returns the run ids of the RUN_STARTED events in log order.
func runStarts(t *testing.T, log []json.RawMessage) []string {
	t.Helper()
	var ids []string
	for _, raw := range log {
		var ev struct {
			Type  string `json:"type"`
			RunID string `json:"runId"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "RUN_STARTED" {
			ids = append(ids, ev.RunID)
		}
	}
	return ids
}

// TestCluster_AnyReplicaServes runs three replicas on one Redis and uses
// a session through all of them: create on one, run on another, stream
// from the third with a reconnect to the first, cancel, queue,
// idempotency keys and approvals, each spread over replicas.
func TestCluster_AnyReplicaServes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	eachSharedStore(t, testAnyReplicaServes)
}

func testAnyReplicaServes(t *testing.T, store sharedStore) {
	a, b, c := newCluster(t, store).startAll()

	t.Run("create on A, run on B, stream from C then A", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"paced"}`)["id"].(string)
		post(t, b.base+"/sessions/"+id+"/run", `{"input":"what time is it?"}`)
		first := stream(t, c.base, id, 0)
		seen := first.until(t, func(f sseFrame) bool { return f.id >= 6 })
		first.Close()
		again := stream(t, a.base, id, seen[len(seen)-1].id)
		defer again.Close()
		seen = append(seen, again.until(t, runEnded)...)
		checkGapless(t, seen)
		if last := seen[len(seen)-1]; last.event != "RUN_FINISHED" {
			t.Fatalf("the run ended with %s %s", last.event, last.data)
		}
		checkSameFrames(t, b.base, id, seen)
		aguitest.VerifyJSON(t, asBytes(eventLog(t, c.base, id)))
	})

	t.Run("cancel on C a run A owns", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
		runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
		body := stream(t, b.base, id, 0)
		defer body.Close()
		body.until(t, func(f sseFrame) bool { return f.event == "TEXT_MESSAGE_CONTENT" })
		status, run := request(t, "POST", c.base+"/sessions/"+id+"/runs/"+runID+"/cancel", "")
		if status != http.StatusOK || run["state"] != "cancelled" {
			t.Fatalf("cancel on C = %d %v, want 200 and the run cancelled", status, run)
		}
		body.until(t, runEnded)
		waitRunState(t, b.base, id, runID, "cancelled")
		aguitest.VerifyJSON(t, asBytes(eventLog(t, a.base, id)))
	})

	t.Run("queue posts over A, B, C run in posting order", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"steady"}`)["id"].(string)
		order := []string{post(t, a.base+"/sessions/"+id+"/run", `{"input":"first"}`)["id"].(string)}
		for i, p := range []*process{b, c, a, b} {
			body := fmt.Sprintf(`{"input":"queued %d","if_busy":"queue"}`, i)
			order = append(order, post(t, p.base+"/sessions/"+id+"/run", body)["id"].(string))
		}
		waitRunState(t, c.base, id, order[len(order)-1], "succeeded")
		log := eventLog(t, b.base, id)
		if got := runStarts(t, log); strings.Join(got, " ") != strings.Join(order, " ") {
			t.Fatalf("runs started in the order %v, posted %v", got, order)
		}
		aguitest.VerifyJSON(t, asBytes(log))
	})

	t.Run("one Idempotency-Key sent to A and B makes one run", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"steady"}`)["id"].(string)
		ids := make([]string, 2)
		var wg sync.WaitGroup
		for i, p := range []*process{a, b} {
			wg.Go(func() {
				status, run := request(t, "POST", p.base+"/sessions/"+id+"/run", `{"input":"once"}`, "Idempotency-Key", "order-7")
				if status >= 300 {
					t.Errorf("POST run on replica %d = %d %v", i, status, run)
					return
				}
				ids[i] = run["id"].(string)
			})
		}
		wg.Wait()
		if ids[0] != ids[1] {
			t.Fatalf("one key made runs %s and %s", ids[0], ids[1])
		}
		var runs struct {
			Data []map[string]any `json:"data"`
		}
		getJSON(t, c.base+"/sessions/"+id+"/runs", &runs)
		if len(runs.Data) != 1 {
			t.Fatalf("the session has %d runs, want 1", len(runs.Data))
		}
	})

	t.Run("an approval asked for on A is decided on B", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"asking"}`)["id"].(string)
		runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"time?"}`)["id"].(string)
		var pending struct {
			Data []struct {
				ToolCallID string `json:"tool_call_id"`
				State      string `json:"state"`
			} `json:"data"`
		}
		pollUntil(t, "the approval request", func() bool {
			getJSON(t, c.base+"/sessions/"+id+"/runs/"+runID+"/approvals", &pending)
			return len(pending.Data) == 1 && pending.Data[0].State == "pending"
		})
		url := b.base + "/sessions/" + id + "/runs/" + runID + "/approvals/" + pending.Data[0].ToolCallID
		if status, got := request(t, "POST", url, `{"decision":"approve"}`); status != http.StatusOK || got["state"] != "approved" {
			t.Fatalf("approve on B = %d %v", status, got)
		}
		waitRunState(t, c.base, id, runID, "succeeded")
		aguitest.VerifyJSON(t, asBytes(eventLog(t, a.base, id)))
	})
}

// ownerOf waits until one of the replicas reports a lease held in its
// metrics and returns it: the replica running the session of a cluster
// with one busy session.
func ownerOf(t *testing.T, replicas ...*process) *process {
	t.Helper()
	var owner *process
	pollUntil(t, "a replica holding the session's lease", func() bool {
		for _, p := range replicas {
			if metric(t, p.base, "kerneld_leases_held") == 1 {
				owner = p
				return true
			}
		}
		return false
	})
	return owner
}

// metric reads one unlabelled gauge or counter from base's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s at %s", name, base)
	return 0
}

// TestCluster_KillOwner kills the replica running a session in the middle
// of a model call while a client streams the session from another. Within
// the lease TTL and a little more, another replica must have taken the
// session over and continued the run: the client's stream goes on, gapless,
// to RUN_FINISHED with the whole answer; every event the client saw before
// the kill stays in the log byte for byte under the same seq; and the
// session runs again on any replica with its seq continuing. The test logs
// how long detection (the take-over) and the continuation took.
func TestCluster_KillOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	eachSharedStore(t, testKillOwner)
}

func testKillOwner(t *testing.T, store sharedStore) {
	a, b, c := newCluster(t, store).startAll()
	id := post(t, b.base+"/sessions", `{"agent":"paced"}`)["id"].(string)
	runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"what time is it?"}`)["id"].(string)
	if owner := ownerOf(t, a, b, c); owner != a {
		t.Fatalf("replica %s runs the session, not the one that accepted the run", owner.base)
	}
	body := stream(t, b.base, id, 0)
	defer body.Close()
	seen := body.until(t, func(f sseFrame) bool { return f.event == "TOOL_CALL_ARGS" })
	killed := a.kill9(t)

	seen = append(seen, body.until(t, runEnded)...)
	checkGapless(t, seen)
	if last := seen[len(seen)-1]; last.event != "RUN_FINISHED" {
		t.Fatalf("the run ended with %s %s", last.event, last.data)
	}
	waitRunState(t, c.base, id, runID, "succeeded")
	raw := eventLog(t, c.base, id)
	checkSameFrames(t, b.base, id, seen)
	log := decodeLog(t, raw)
	resumed := resumedEvents(t, log)
	require.Len(t, resumed, 1)
	assert.Equal(t, "takeover", resumed[0]["reason"])
	assert.Equal(t, "It is later than you think, and that is fine.", answerOf(log))
	for _, ev := range log {
		if ev.Type == "CUSTOM" && ev.Name == "kerneld.run.resumed" {
			took := time.UnixMilli(ev.Timestamp).Sub(killed)
			detected, _ := loggedAt(t, b.logs.String()+c.logs.String(), "session taken over", "session="+id)
			t.Logf("taken over %v and continued %v after the kill (lease TTL %v)",
				detected.Sub(killed).Round(time.Millisecond), took.Round(time.Millisecond), clusterLeaseTTL)
			assert.Less(t, took, clusterLeaseTTL+5*time.Second, "taken over within the lease TTL and a little more")
		}
	}
	checkHistoryAnswered(t, c.base, id)

	next := post(t, c.base+"/sessions/"+id+"/run", `{"input":"and now?"}`)
	if next["start_seq"].(float64) != float64(len(raw)+1) {
		t.Fatalf("next run starts at seq %v, want %d", next["start_seq"], len(raw)+1)
	}
	waitRunState(t, b.base, id, next["id"].(string), "succeeded")
	aguitest.VerifyJSON(t, asBytes(eventLog(t, b.base, id)))
}

// TestCluster_Fencing pauses the replica running a session past its
// lease, lets another replica take the session over and continue the run,
// and resumes it: the paused replica must append nothing more to the
// session (the log, which it would have to add to the message it had
// open, stays valid AG-UI with the whole answer once), and must let its
// lease go.
func TestCluster_Fencing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	eachSharedStore(t, testFencing)
}

func testFencing(t *testing.T, store sharedStore) {
	a, b, c := newCluster(t, store).startAll()
	id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
	runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
	body := stream(t, b.base, id, 0)
	defer body.Close()
	seen := body.until(t, assistantText())
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "another replica to continue the run", func() bool {
		return strings.Contains(eventLogText(t, c.base, id), "kerneld.run.resumed")
	})
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the resumed replica to stop the run it lost", func() bool {
		return strings.Contains(a.logs.String(), "without writing")
	})
	pollUntil(t, "the resumed replica to let its lease go", func() bool {
		return metric(t, a.base, "kerneld_leases_held") == 0
	})
	waitRunState(t, c.base, id, runID, "succeeded")
	seen = append(seen, body.until(t, runEnded)...)
	checkGapless(t, seen)
	checkSameFrames(t, c.base, id, seen)
	after := eventLog(t, b.base, id)
	aguitest.VerifyJSON(t, asBytes(after))
	assert.Equal(t, longAnswer, answerOf(decodeLog(t, after)))

	next := post(t, a.base+"/sessions/"+id+"/run", `{"input":"again"}`)
	if next["start_seq"].(float64) != float64(len(after)+1) {
		t.Fatalf("next run starts at seq %v, want %d", next["start_seq"], len(after)+1)
	}
}

// loggedAt returns the time of the first line of logs (kerneld's text
// logs) whose message is msg and that holds attr.
func loggedAt(t *testing.T, logs, msg, attr string) (time.Time, bool) {
	t.Helper()
	for line := range strings.SplitSeq(logs, "\n") {
		if !strings.Contains(line, `msg="`+msg+`"`) || !strings.Contains(line, " "+attr) {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		require.NoError(t, err, "log line %q", line)
		return at, true
	}
	return time.Time{}, false
}

// eventLogText returns a session's log as one text, for looking for an
// event by name.
func eventLogText(t *testing.T, base, id string) string {
	t.Helper()
	var b strings.Builder
	for _, raw := range eventLog(t, base, id) {
		b.Write(raw)
	}
	return b.String()
}

// ownRedis is a Redis server of one test's own, which it may stop and
// start: the shared test server must stay up for the others.
type ownRedis struct {
	t    *testing.T
	port string
	dir  string
	cmd  *exec.Cmd
	// volatile keeps nothing on disk (appendonly no, no snapshots): a
	// restart comes back empty.
	volatile bool
}

// startOwnRedis starts redis-server with an append-only file synced on
// every write, so a crash loses nothing it acknowledged.
func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	return startRedis(t, false)
}

// startVolatileRedis starts redis-server keeping nothing on disk, so that
// a restart loses every key.
func startVolatileRedis(t *testing.T) *ownRedis {
	t.Helper()
	return startRedis(t, true)
}

func startRedis(t *testing.T, volatile bool) *ownRedis {
	t.Helper()
	redistest.Require(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(redistest.EnvRequire) == "1" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("skip: needs redis-server to restart a Redis of its own")
	}
	r := &ownRedis{t: t, port: strconv.Itoa(freePort(t)), dir: t.TempDir(), volatile: volatile}
	r.start()
	return r
}

func (r *ownRedis) url() string { return "redis://127.0.0.1:" + r.port + "/0" }

func (r *ownRedis) start() {
	r.t.Helper()
	persistence := []string{"--appendonly", "yes", "--appendfsync", "always"}
	if r.volatile {
		persistence = []string{"--appendonly", "no"}
	}
	r.cmd = exec.Command("redis-server", append([]string{"--port", r.port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", ""}, persistence...)...)
	logs := &syncBuffer{}
	r.cmd.Stdout = logs
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	cmd := r.cmd
	r.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pollUntil(r.t, "redis-server to accept connections", func() bool {
		return strings.Contains(logs.String(), "Ready to accept connections")
	})
}

// crash kills the server as a crash would.
func (r *ownRedis) crash() {
	r.t.Helper()
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

// readyStatus returns base's /readyz status.
func readyStatus(t *testing.T, base string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// TestCluster_RedisOutage takes Redis away mid-run. A crash and restart
// (with an append-only file synced on every write) of about two seconds
// loses nothing a client saw, /readyz says 503 while Redis is away and 200
// again after, and the run goes on, on the same replica or another, to
// its whole answer. A dropped connection is invisible: the run goes on and
// a client on another replica sees it all.
func TestCluster_RedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	r := startOwnRedis(t)
	cl := newCluster(t, redisStore(r.url(), "kerneld:"))
	a, b := cl.start("a"), cl.start("b")

	t.Run("a restart mid-run", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
		runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
		body := stream(t, a.base, id, 0)
		seen := body.until(t, func(f sseFrame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id >= 10 })
		body.Close()
		r.crash()
		down := time.Now()
		pollUntil(t, "/readyz to fail while Redis is away", func() bool {
			return readyStatus(t, a.base) == http.StatusServiceUnavailable && readyStatus(t, b.base) == http.StatusServiceUnavailable
		})
		pollUntil(t, "the owner to notice", func() bool {
			return strings.Contains(a.logs.String(), "the store refused a run's events")
		})
		time.Sleep(time.Until(down.Add(2 * time.Second))) // Redis stays away about two seconds, as a restart does
		r.start()
		t.Logf("Redis was away %v", time.Since(down).Round(time.Millisecond))
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
	})

	t.Run("dropped connections mid-run", func(t *testing.T) {
		id := post(t, a.base+"/sessions", `{"agent":"long"}`)["id"].(string)
		runID := post(t, a.base+"/sessions/"+id+"/run", `{"input":"go"}`)["id"].(string)
		body := stream(t, b.base, id, 0)
		defer body.Close()
		seen := body.until(t, func(f sseFrame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id >= 10 })
		killClients(t, r.url())
		seen = append(seen, body.until(t, runEnded)...)
		checkGapless(t, seen)
		if last := seen[len(seen)-1]; last.event != "RUN_FINISHED" {
			t.Fatalf("the run ended with %s %s", last.event, last.data)
		}
		waitRunState(t, a.base, id, runID, "succeeded")
		checkSameFrames(t, a.base, id, seen)
	})
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// killClients closes every client connection of the Redis at url, as a
// proxy restart or a network blip does.
func killClients(t *testing.T, url string) {
	t.Helper()
	c := redistest.Server{URL: url}.Client(t)
	for _, typ := range []string{"normal", "pubsub"} {
		if err := c.Do(t.Context(), "CLIENT", "KILL", "TYPE", typ).Err(); err != nil {
			t.Fatalf("CLIENT KILL TYPE %s: %v", typ, err)
		}
	}
}
