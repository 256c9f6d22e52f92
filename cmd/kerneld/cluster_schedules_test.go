package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCount returns how many runs session id has, read from p.
func runCount(t *testing.T, p *process, id string) int {
	t.Helper()
	var page struct{ Data []map[string]any }
	getJSON(t, p.base+"/sessions/"+id+"/runs", &page)
	return len(page.Data)
}

// scheduleAt creates a session on p with a schedule that fires once at
// at, posted through q, and returns the session's id.
func scheduleAt(t *testing.T, p, q *process, at time.Time) string {
	t.Helper()
	id := post(t, p.base+"/sessions", `{"agent":"steady"}`)["id"].(string)
	code, body := request(t, "POST", q.base+"/sessions/"+id+"/schedules",
		`{"at":"`+at.UTC().Format(time.RFC3339Nano)+`","input":"scheduled"}`)
	require.Equal(t, http.StatusCreated, code, "%v", body)
	return id
}

// TestCluster_ScheduleFiresOnce: three replicas on one shared store, each looking
// for due schedules every second, fire each schedule exactly once, with
// a real kernel, whichever replica took the schedule and holds the
// session.
func TestCluster_ScheduleFiresOnce(t *testing.T) {
	eachSharedStore(t, testScheduleFiresOnce)
}

func testScheduleFiresOnce(t *testing.T, store sharedStore) {
	c := newCluster(t, store)
	a, b, cc := c.startAll()
	replicas := []*process{a, b, cc}
	due := time.Now().Add(time.Second)
	var ids []string
	for i := range 6 {
		ids = append(ids, scheduleAt(t, replicas[i%3], replicas[(i+1)%3], due))
	}
	// A schedule due two polls later: once its run is in, every replica
	// has looked for the earlier ones at least twice since they were due.
	sentinel := scheduleAt(t, a, b, due.Add(2*time.Second))
	pollUntil(t, "the last schedule's run", func() bool { return runCount(t, cc, sentinel) == 1 })
	for _, id := range ids {
		assert.Equal(t, 1, runCount(t, replicas[0], id), "runs of session %s", id)
	}
	var page struct{ Data []map[string]any }
	getJSON(t, a.base+"/sessions/"+sentinel+"/runs", &page)
	assert.Equal(t, "schedule", page.Data[0]["source"], "a firing's run says a schedule posted it")
}

// TestCluster_ScheduleAfterDowntime: a schedule due while no replica ran
// fires once when one comes back.
func TestCluster_ScheduleAfterDowntime(t *testing.T) {
	eachSharedStore(t, testScheduleAfterDowntime)
}

func testScheduleAfterDowntime(t *testing.T, store sharedStore) {
	c := newCluster(t, store)
	a := c.start("a")
	due := time.Now().Add(1500 * time.Millisecond)
	id := scheduleAt(t, a, a, due)
	require.NoError(t, a.cmd.Process.Kill()) // well before the schedule comes due
	_ = a.cmd.Wait()
	time.Sleep(time.Until(due)) // kerneld is down when the schedule comes due
	b := c.start("b")
	sentinel := scheduleAt(t, b, b, time.Now().Add(2*time.Second))
	pollUntil(t, "the later schedule's run", func() bool { return runCount(t, b, sentinel) == 1 })
	assert.Equal(t, 1, runCount(t, b, id), "the schedule missed while down fired once")
}
