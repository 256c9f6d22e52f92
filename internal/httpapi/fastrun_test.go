package httpapi_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// TestEventStream_FastRunReachesEveryReader runs a model as fast as the
// machine allows (token_delay 0: a local model or a cached answer) while
// clients read the session's stream and the run's inline stream. Every
// reader gets every event once, in order, up to RUN_FINISHED, whatever
// the size of the kernel's append batches: a client that keeps up is never
// dropped.
func TestEventStream_FastRunReachesEveryReader(t *testing.T) {
	cases := []struct {
		tokens, readers int
	}{
		{100_000, 1}, {20_000, 1}, {20_000, 10}, {20_000, 100},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for _, store := range []string{"memory", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			// These readers never stop reading, but on a loaded machine
			// the race detector and the scheduler can keep one off a CPU
			// for longer than the default bounds, which would drop a
			// reader that is reading: the bounds here only catch a hang.
			ts := newServer(t, serverOptions{
				kernel:    kerneltest.Options{Store: openStore(t, store)},
				streams:   httpapi.StreamOptions{WriteTimeout: 2 * time.Minute, MaxLag: 5 * time.Minute},
				unchecked: true,
			})
			for _, tc := range cases {
				t.Run(fmt.Sprintf("tokens=%d/readers=%d", tc.tokens, tc.readers), func(t *testing.T) {
					fastRun(t, ts, tc.tokens, tc.readers)
				})
			}
		})
	}
}

// fastRun streams one run of n one-letter tokens to readers session
// streams and its own inline stream, and checks what each received.
func fastRun(t *testing.T, ts *testServer, n, readers int) {
	id := ts.createSession(t, "echo")
	results := make([]readResult, readers+1)
	var wg sync.WaitGroup
	for i := range readers {
		res := ts.openRaw(t, "GET", "/sessions/"+id+"/events", "")
		wg.Go(func() { results[i] = readToRunEnd(res) })
	}
	waitFor(t, "readers subscribed", func() bool { return ts.streams.Open() >= readers })
	inline := ts.openRaw(t, "POST", "/sessions/"+id+"/run", `{"input":"`+strings.Repeat("a ", n)+`"}`)
	wg.Go(func() { results[readers] = readToRunEnd(inline) })
	wg.Wait()

	want := int64(n + 7) // RUN_STARTED, the echoed input (3), the answer's start and end, RUN_FINISHED
	for i, r := range results {
		name := fmt.Sprintf("session reader %d", i)
		if i == readers {
			name = "inline stream"
		}
		switch {
		case r.err != nil:
			t.Errorf("%s: %v after %d events", name, r.err, r.events)
		case r.events != want || r.tokens != int64(n):
			t.Errorf("%s: %d events with %d tokens, want %d with %d", name, r.events, r.tokens, want, n)
		}
	}
}

// readResult is what one reader saw.
type readResult struct {
	events, tokens int64
	err            error
}

// readToRunEnd reads a stream up to its first RUN_FINISHED, checking that
// the ids go 1, 2, 3… (the inline stream starts at its run's start) with
// no gap and no repeat, and that the stream does not end before.
func readToRunEnd(res *http.Response) readResult {
	defer res.Body.Close()
	var r readResult
	br := bufio.NewReaderSize(res.Body, 64<<10)
	var last int64
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) { // a long data line: only its start matters
				_, err = br.ReadSlice('\n')
			}
			if err == nil {
				continue
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			r.err = fmt.Errorf("stream ended before RUN_FINISHED (last id %d)", last)
			return r
		case err != nil:
			r.err = err
			return r
		case bytes.HasPrefix(line, []byte("id: ")):
			id, perr := strconv.ParseInt(string(bytes.TrimSpace(line[4:])), 10, 64)
			if perr != nil || (last != 0 && id != last+1) {
				r.err = fmt.Errorf("id %q after %d", bytes.TrimSpace(line), last)
				return r
			}
			last = id
			r.events++
		case bytes.Equal(line, []byte("event: TEXT_MESSAGE_CONTENT\n")):
			r.tokens++
		case bytes.Equal(line, []byte("event: RUN_FINISHED\n")):
			r.tokens-- // the echoed input is one content event too
			return r
		}
	}
}

// openRaw sends a request that answers with an event stream and returns
// the response for the caller to read.
func (ts *testServer) openRaw(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("%s %s = %d %s", method, path, res.StatusCode, b)
	}
	return res
}

// openStore opens a fresh store of the named kind, closed when the test
// ends.
func openStore(t *testing.T, kind string) kernel.Store {
	t.Helper()
	if kind == "memory" {
		return memory.New()
	}
	db, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "kerneld.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}
