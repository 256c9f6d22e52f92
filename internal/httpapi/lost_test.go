package httpapi_test

import (
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// TestEvents_SessionLostFromStore deletes a session from the SQLite file
// behind the kernel's back, as an operator's script or a restored backup
// would, while a client follows its stream. The stream ends, as a deleted
// session's stream does, instead of sending pings forever for a session
// that answers 404; its client's reconnect gets 204, which stops an
// EventSource. Another session's stream goes on.
func TestEvents_SessionLostFromStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kerneld.db")
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() }) // after the kernel's cleanup, which comes later
	ts := newServer(t, serverOptions{kernel: kerneltest.Options{Store: db},
		streams: httpapi.StreamOptions{Heartbeat: 50 * time.Millisecond}})
	lost, kept := ts.createSession(t, "echo"), ts.createSession(t, "echo")
	ts.waitRun(t, lost, ts.startRun(t, lost, "hello"))
	lostStream := ts.openStream(t, "GET", "/sessions/"+lost+"/events", "")
	keptStream := ts.openStream(t, "GET", "/sessions/"+kept+"/events", "")
	seen := lostStream.events(t, runEnded)
	last := seen[len(seen)-1].id

	deleteBehindKernel(t, path, lost)
	ts.must(t, http.StatusNotFound, "GET", "/sessions/"+lost, "")
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, lostStream.r) // pings until the server ends the stream
		ended <- err
	}()
	select {
	case err := <-ended:
		require.NoError(t, err, "the stream of the lost session must end cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a session the store lost is still open 10 s later")
	}
	res := ts.do(t, "GET", "/sessions/"+lost+"/events", "", "Accept", "text/event-stream",
		"Last-Event-ID", strconv.FormatInt(last, 10))
	require.Equal(t, http.StatusNoContent, res.status, "a reconnect to the lost session: %s", res.body)

	ts.waitRun(t, kept, ts.startRun(t, kept, "still here"))
	require.NotEmpty(t, keptStream.events(t, runEnded), "the other session's stream goes on")
}

// deleteBehindKernel deletes session id from the SQLite database at path
// through a connection of its own (its runs, events and memory go with
// it: ON DELETE CASCADE).
func deleteBehindKernel(t *testing.T, path, id string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer conn.Close()
	res, err := conn.ExecContext(t.Context(), `DELETE FROM sessions WHERE id = ?`, id)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "session %s in %s", id, path)
}
