package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// fillerAgent streams 400 words of 1 KiB each, 10 ms apart: a run that
// needs new pages for every few events, and lasts long enough to fill the
// store under it.
var fillerAgent = `
name: filler
description: streams long words
model: {provider: scripted, token_delay: 10ms, script: [{text: "` +
	strings.Repeat(strings.Repeat("w", 1024)+" ", 400) + `"}]}
`

// TestDiskFull_MidRun fills a SQLite store to the brim while a run streams
// (SQLite refuses every write, as on a disk full to the last byte) and
// checks, through the HTTP API, what clients see during the outage and
// after space returns: the run pauses, and is not said to have ended,
// new runs and the cancel are refused 503 storage_unavailable with
// Retry-After, writes answer 503 or succeed but never 500, the stream
// shows nothing the log lacks; once space returns the run is continued
// (kerneld.run.resumed, store_outage) and ends with its whole answer, the
// stream shows it with no gap, and the session takes runs again. The
// lease TTL, which bounds how long a run retries its writes before it
// pauses, is short so the test is, but long enough that renewals starved
// on a loaded machine do not let the lease lapse.
func TestDiskFull_MidRun(t *testing.T) {
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "kerneld.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() }) // after the kernel's cleanup, which comes later
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: db,
		Agents: []string{kerneltest.Echo, fillerAgent}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Replication: kernel.Replication{LeaseTTL: 2 * time.Second}}})
	id := ts.createSession(t, "filler")
	other := ts.createSession(t, "echo")
	stream := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
	runID := ts.startRun(t, id, "fill")
	seen := stream.events(t, func(f frame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id > 8 })

	refuseWrites(t, db, true) // a disk full to the last byte: no write fits, however small
	// The run retries its appends for the lease TTL, then pauses: the
	// session refuses runs for it, naming the paused run.
	waitFor(t, "the run to pause", func() bool {
		res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"next"}`)
		require.Contains(t, []int{http.StatusConflict, http.StatusServiceUnavailable}, res.status, "%s", res.body)
		return res.status == http.StatusServiceUnavailable && strings.Contains(string(res.body), `"active_run_id"`)
	})
	during := checkOutage(t, ts, id, other, runID)
	// Nothing the log lacks: read up to the log's end, the stream is
	// whole, and if it shows the run's end (the small events that close a
	// run may fit where its tokens did not), that end is in the log and is
	// the one the run's record will say.
	seen = append(seen, readTo(t, stream, seen[len(seen)-1].id, during)...)
	assertSeqs(t, seen, seen[0].id, during)
	for _, f := range seen[:len(seen)-1] {
		require.False(t, runEnded(f), "the stream says %s at seq %d, before the log's end", f.event, f.id)
	}

	refuseWrites(t, db, false) // space again
	// The paused run tries again with growing waits (up to 5 s), then
	// streams the rest of its answer.
	var run map[string]any
	waitLong(t, "the paused run to end", func() bool {
		run = ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "")
		return run["ended_at"] != nil
	})
	assert.Equal(t, "succeeded", run["state"])
	if !runEnded(seen[len(seen)-1]) {
		seen = append(seen, stream.events(t, runEnded)...)
	}
	assertSeqs(t, seen, seen[0].id, int64(run["end_seq"].(float64)))
	assert.Equal(t, "RUN_FINISHED", seen[len(seen)-1].event)
	resumed := 0
	for _, f := range seen {
		if f.event == "CUSTOM" && strings.Contains(f.data, `"name":"kerneld.run.resumed"`) {
			resumed++
			assert.Contains(t, f.data, `"reason":"store_outage"`)
		}
	}
	assert.Equal(t, 1, resumed, "the run was continued once")
	ts.must(t, http.StatusOK, "GET", "/readyz", "")
	next := ts.startRun(t, id, "again") // another long answer, as long under load
	waitLong(t, "the next run to end", func() bool {
		run = ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+next, "")
		return run["ended_at"] != nil
	})
	assert.Equal(t, "succeeded", run["state"], "the session takes runs again")
}

// checkOutage checks, while the store of session id cannot record the end
// of its run runID, what the run, the session, a cancel and every write
// route answer. other is another session, idle. It returns the session's
// last seq.
func checkOutage(t *testing.T, ts *testServer, id, other, runID string) int64 {
	t.Helper()
	wantStorageUnavailable(t, ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"next"}`))
	wantStorageUnavailable(t, ts.do(t, "POST", "/sessions/"+id+"/runs/"+runID+"/cancel", ""))
	run := ts.must(t, http.StatusOK, "GET", "/sessions/"+id+"/runs/"+runID, "")
	assert.Equal(t, "running", run["state"], "the run's end is not recorded yet")
	s := ts.must(t, http.StatusServiceUnavailable, "GET", "/readyz", "")
	assert.Equal(t, "store_unavailable", s["code"])
	sess := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	assert.Equal(t, runID, sess["active_run_id"])

	// Every write that needs room is refused as retryable; one that
	// needs none may succeed. (Deleting a session would free pages the
	// paused run could take, so this test does not.)
	meta := map[string]string{}
	for i := range 60 {
		meta[fmt.Sprint("k", i)] = strings.Repeat("m", 500)
	}
	bulky, err := json.Marshal(map[string]any{"agent": "echo", "metadata": meta})
	require.NoError(t, err)
	wantStorageUnavailable(t, ts.do(t, "POST", "/sessions", string(bulky)))
	big := strings.Repeat("b", 60<<10)
	wantStorageUnavailable(t, ts.do(t, "POST", "/sessions/"+other+"/run", `{"input":"`+big+`"}`))
	wantStorageUnavailable(t, ts.do(t, "PUT", "/sessions/"+other+"/memory/k", `{"value":"`+big+`"}`))
	for _, w := range []struct{ method, path, body string }{
		{"PATCH", "/sessions/" + other, `{"name":"renamed"}`},
		{"DELETE", "/sessions/" + other + "/memory/k", ""},
	} {
		res := ts.do(t, w.method, w.path, w.body)
		if res.status >= 500 {
			wantStorageUnavailable(t, res)
		}
	}
	return int64(sess["last_seq"].(float64))
}

// wantStorageUnavailable checks res is a 503 storage_unavailable with
// Retry-After.
func wantStorageUnavailable(t *testing.T, res response) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, res.status, "%s", res.body)
	var p struct{ Code string }
	require.NoError(t, json.Unmarshal(res.body, &p))
	assert.Equal(t, "storage_unavailable", p.Code)
	assert.Equal(t, "1", res.header.Get("Retry-After"))
}

// readTo reads the stream's event frames after last up to seq.
func readTo(t *testing.T, s *sseStream, last, seq int64) []frame {
	t.Helper()
	if last >= seq {
		return nil
	}
	return s.events(t, func(f frame) bool { return f.id >= seq })
}

// waitLong waits up to a minute for cond.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refuseWrites makes the store refuse every write, or take them again.
func refuseWrites(t *testing.T, db *sqlite.Store, refuse bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, db.RefuseWrites(ctx, refuse))
}
