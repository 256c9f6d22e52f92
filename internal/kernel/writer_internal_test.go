package kernel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
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

// TestEventWriter_Coalesces: events written while an append commits go
// into the next append together, in order, with gapless seqs.
func TestEventWriter_Coalesces(t *testing.T) {
	st := &gatedStore{Store: memory.New(), gate: make(chan struct{})}
	k, id, token := newWriterKernel(t, st)
	w := newEventWriter(k, context.Background(), token, id, "r1")
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
	w := newEventWriter(k, context.Background(), token, id, "r1")
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
