package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// stallLimit is how long a stalled store call waits for its caller's
// context before giving up. It only matters when no deadline comes, and
// then it turns a hang into a failed assertion.
const stallLimit = 5 * time.Second

// stallingStore is a memory store whose session and run listings, once
// armed, wait until their caller's context ends and return its error, as
// a real store does when a query outlives its deadline. It makes a request
// slow without a sleep: the call returns exactly when the deadline hits.
type stallingStore struct {
	kernel.Store
	armed   atomic.Bool
	stalled atomic.Int32 // calls that stalled
}

func (s *stallingStore) stall(ctx context.Context) error {
	if !s.armed.Load() {
		return nil
	}
	s.stalled.Add(1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(stallLimit):
		return nil // no deadline: let the call through, so the test fails instead of hanging
	}
}

// ListSessions implements kernel.Store.
func (s *stallingStore) ListSessions(ctx context.Context, q kernel.SessionQuery) ([]session.Session, error) {
	if err := s.stall(ctx); err != nil {
		return nil, err
	}
	return s.Store.ListSessions(ctx, q)
}

// ListRuns implements kernel.Store.
func (s *stallingStore) ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error) {
	if err := s.stall(ctx); err != nil {
		return nil, err
	}
	return s.Store.ListRuns(ctx, sessionID, q)
}

// TestTimeout_RequestResponse: a request/response route whose kernel call
// outlives the request timeout answers 504 problem+json with code
// timeout, as soon as the deadline hits.
func TestTimeout_RequestResponse(t *testing.T) {
	const timeout = 100 * time.Millisecond
	store := &stallingStore{Store: memory.New()}
	ts := newServer(t, serverOptions{
		kernel: kerneltest.Options{Store: store},
		api:    httpapi.Options{RequestTimeout: timeout},
	})
	id := ts.createSession(t, "echo")
	store.armed.Store(true)
	routes := []struct{ name, path string }{
		{"session list", "/sessions"},
		{"children", "/sessions/" + id + "/children"},
		{"run list", "/sessions/" + id + "/runs"},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			before := store.stalled.Load()
			start := time.Now()
			res := ts.do(t, "GET", rt.path, "")
			took := time.Since(start)
			wantProblem(t, res, http.StatusGatewayTimeout, "timeout")
			if store.stalled.Load() == before {
				t.Fatal("the store was never called: the 504 did not come from the deadline")
			}
			if took < timeout {
				t.Errorf("answered after %v, before the %v timeout", took, timeout)
			}
			if took >= stallLimit {
				t.Errorf("answered after %v: the store gave up before any deadline", took)
			}
		})
	}
}

// TestTimeout_StreamsNotCut: the request timeout bounds request/response
// routes only. An event stream, and a run streamed inline, stay open and
// keep delivering well past it.
func TestTimeout_StreamsNotCut(t *testing.T) {
	const timeout = 100 * time.Millisecond
	ts := newServer(t, serverOptions{
		api:     httpapi.Options{RequestTimeout: timeout},
		streams: httpapi.StreamOptions{Heartbeat: 10 * time.Millisecond},
	})
	t.Run("events", func(t *testing.T) {
		id := ts.createSession(t, "echo")
		s := ts.openStream(t, "GET", "/sessions/"+id+"/events", "")
		if early := readPast(t, s, 3*timeout); len(early) != 0 {
			t.Fatalf("got %d event frames before any run", len(early))
		}
		runID := ts.startRun(t, id, "still there?")
		frames := s.events(t, runEnded)
		assertWholeRun(t, frames, 1, runID)
	})
	t.Run("inline run", func(t *testing.T) {
		id := ts.createSession(t, "waiter")
		s := ts.openStream(t, "POST", "/sessions/"+id+"/run", `{"input":"wait"}`)
		select { // from here the run cannot end until Release
		case <-ts.kernel.Wait.Started():
		case <-time.After(10 * time.Second):
			t.Fatal("the run never called the wait tool")
		}
		frames := readPast(t, s, 3*timeout)
		ts.kernel.Wait.Release()
		frames = append(frames, s.events(t, nil)...) // to EOF: the run's end ends the response
		assertWholeRun(t, frames, 1, strings.TrimPrefix(s.res.Header.Get("Location"), "/sessions/"+id+"/runs/"))
	})
}

// readPast reads s for at least d, failing if the server ends the stream
// meanwhile, and returns the event frames read. Heartbeats keep frames
// coming on an idle stream, so it returns soon after d.
func readPast(t *testing.T, s *sseStream, d time.Duration) []frame {
	t.Helper()
	var out []frame
	start := time.Now()
	for time.Since(start) < d {
		f, err := s.next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("the server ended the stream after %v, within %v", time.Since(start).Round(time.Millisecond), d)
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		if f.id != 0 {
			out = append(out, f)
		}
	}
	return out
}

// assertWholeRun checks that frames are one whole run, runID, from seq
// from: RUN_STARTED first, a successful RUN_FINISHED last, no gap.
func assertWholeRun(t *testing.T, frames []frame, from int64, runID string) {
	t.Helper()
	if len(frames) == 0 {
		t.Fatal("no event frames")
	}
	first, last := frames[0], frames[len(frames)-1]
	if first.event != "RUN_STARTED" || runOf(t, first).RunID != runID {
		t.Fatalf("first frame = %s %s, want RUN_STARTED of run %s", first.event, first.data, runID)
	}
	if last.event != "RUN_FINISHED" || runOf(t, last).Outcome.Type != "success" {
		t.Fatalf("last frame = %s %s, want a successful RUN_FINISHED", last.event, last.data)
	}
	assertSeqs(t, frames, from, last.id)
}

// runEvent is what the run's boundary events carry.
type runEvent struct {
	RunID   string `json:"runId"`
	Outcome struct {
		Type string `json:"type"`
	} `json:"outcome"`
}

// runOf decodes a RUN_STARTED or RUN_FINISHED frame's data.
func runOf(t *testing.T, f frame) runEvent {
	t.Helper()
	var ev runEvent
	if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
		t.Fatalf("decode %s frame %s: %v", f.event, f.data, err)
	}
	return ev
}
