package kernel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// gatedStore holds every AppendEvents until released, counts the calls
// and can fail them.
type gatedStore struct {
	Store
	mu      sync.Mutex
	batches []int // events per AppendEvents call
	gate    chan struct{}
	fail    error
}

func (s *gatedStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	<-s.gate
	s.mu.Lock()
	s.batches = append(s.batches, len(evs))
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return s.Store.AppendEvents(ctx, token, evs)
}

// newWriterKernel returns a kernel on st with one session, and the token of
// that session's lease, which the test holds.
func newWriterKernel(t *testing.T, st Store) (*Kernel, string, int64) {
	t.Helper()
	reg, err := agents.NewRegistry(agents.Options{}, agents.Spec{Name: "a", Provider: nopProvider{}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(Config{Agents: reg, Tools: tools.NewRegistry(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	s, err := k.CreateSession(t.Context(), CreateSession{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	token, err := st.AcquireLease(t.Context(), s.ID, "test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return k, s.ID, token
}

// testWriter returns the writer of a run "r1" of session id, held with
// token, whose log is empty.
func testWriter(t *testing.T, k *Kernel, id string, token int64) *eventWriter {
	t.Helper()
	h := &held{id: id, token: token, ctx: t.Context()}
	ar := &activeRun{run: session.Run{ID: "r1", SessionID: id}, ctx: context.Background()}
	return newEventWriter(k, ar, h, 0, writerPolicy{})
}

// TestEventWriter_Coalesces: events written while an append commits go
// into the next append together, in order, with gapless seqs.
func TestEventWriter_Coalesces(t *testing.T) {
	st := &gatedStore{Store: memory.New(), gate: make(chan struct{})}
	k, id, token := newWriterKernel(t, st)
	w := testWriter(t, k, id, token)
	for i := range 10 {
		if err := w.write(session.TextMessageContent("m", string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	close(st.gate)
	last, err := w.flush()
	if err != nil || last != 10 {
		t.Fatalf("flush = %d, %v; want 10", last, err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	if len(st.batches) > 2 {
		t.Errorf("10 events queued behind one commit took %d appends (%v), want at most 2", len(st.batches), st.batches)
	}
	evs, _ := st.ReadEvents(t.Context(), id, 0, 0)
	for i, ev := range evs {
		if ev.Seq != int64(i+1) || ev.Member("delta") != string(rune('a'+i)) {
			t.Fatalf("event %d = seq %d delta %q", i, ev.Seq, ev.Member("delta"))
		}
	}
}

// TestEventWriter_FailureIsFinal: after a failed append nothing more is
// appended, and every later write and flush reports the failure.
func TestEventWriter_FailureIsFinal(t *testing.T) {
	broken := errors.New("disk full")
	st := &gatedStore{Store: memory.New(), gate: make(chan struct{}), fail: broken}
	k, id, token := newWriterKernel(t, st)
	w := testWriter(t, k, id, token)
	_ = w.write(session.TextMessageContent("m", "a"))
	close(st.gate)
	if _, err := w.flush(); !errors.Is(err, broken) {
		t.Fatalf("flush = %v, want the append failure", err)
	}
	st.mu.Lock()
	st.fail = nil // the store recovers, but the run's log must not go on half-written
	st.mu.Unlock()
	if err := w.write(session.TextMessageContent("m", "b")); !errors.Is(err, broken) {
		t.Fatalf("write after failure = %v", err)
	}
	if err := w.close(); !errors.Is(err, broken) {
		t.Fatalf("close = %v", err)
	}
	if evs, _ := st.ReadEvents(t.Context(), id, 0, 0); len(evs) != 0 {
		t.Fatalf("%d events appended after a failed batch", len(evs))
	}
}

type nopProvider struct{}

func (nopProvider) Stream(context.Context, llm.Request, func(llm.Chunk) error) error { return nil }

// lossyStore appends events, and can fail an append with a store that
// cannot take writes: before applying it, or after, losing only the
// answer, as a connection cut at the wrong moment does.
type lossyStore struct {
	Store
	mu       sync.Mutex
	failures []bool // the next appends' failures: true applies the batch first
	appends  int
}

func (s *lossyStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	s.mu.Lock()
	s.appends++
	var fail, applied bool
	if len(s.failures) > 0 {
		fail, applied = true, s.failures[0]
		s.failures = s.failures[1:]
	}
	s.mu.Unlock()
	if !fail {
		return s.Store.AppendEvents(ctx, token, evs)
	}
	if applied {
		if err := s.Store.AppendEvents(ctx, token, evs); err != nil {
			return err
		}
	}
	return errdefs.Storage("the connection was lost", errors.New("EOF"))
}

// TestEventWriter_RetriesWithoutDoubling: an append the store could not
// take is tried again, and one whose answer was lost after it was applied
// is found in the log instead of being appended twice; the seqs stay
// gapless and every event is logged once.
func TestEventWriter_RetriesWithoutDoubling(t *testing.T) {
	st := &lossyStore{Store: memory.New(), failures: []bool{false, true}}
	k, id, token := newWriterKernel(t, st)
	w := testWriter(t, k, id, token)
	if err := w.write(session.TextMessageContent("m", "a"), session.TextMessageContent("m", "b")); err != nil {
		t.Fatal(err)
	}
	if last, err := w.flush(); err != nil || last != 2 {
		t.Fatalf("flush = %d, %v; want 2 after a refused append", last, err)
	}
	if err := w.write(session.TextMessageContent("m", "c")); err != nil {
		t.Fatal(err)
	}
	if last, err := w.flush(); err != nil || last != 3 {
		t.Fatalf("flush = %d, %v; want 3 after an append whose answer was lost", last, err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	evs, _ := st.ReadEvents(t.Context(), id, 0, 0)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Member("delta"))
	}
	if strings.Join(got, "") != "abc" {
		t.Fatalf("log = %q, want a, b, c once each", got)
	}
	if st.appends != 3 {
		t.Errorf("%d appends, want 3: refused, sent again, applied without an answer (and found there)", st.appends)
	}
}
