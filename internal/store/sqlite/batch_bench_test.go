package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kerneld/kerneld/internal/session"
)

// BenchmarkAppendBatch measures what one group commit of the event writer
// costs, without the goroutine hand-offs around it: each op is one batch
// of `events` token events, perCall to an AppendEvents call, every call of
// its own session (so a batch touches events/perCall sessions), committed
// the way the writer commits what it collected.
func BenchmarkAppendBatch(b *testing.B) {
	for _, perCall := range []int{1, 16} {
		for _, n := range []int{1, 16, 64, 256, 1024} {
			if n < perCall {
				continue
			}
			b.Run(fmt.Sprintf("perCall=%d/events=%d", perCall, n), func(b *testing.B) {
				benchAppendBatch(b, n/perCall, perCall)
			})
		}
	}
}

func benchAppendBatch(b *testing.B, calls, perCall int) {
	s := openBatchBench(b)
	reqs := make([]*writeReq, calls)
	for i := range reqs {
		id := uuid.Must(uuid.NewV7()).String()
		now := time.Now()
		err := s.CreateSession(b.Context(), session.Session{ID: id, State: session.StateActive,
			RootID: id, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = &writeReq{evs: events(id, perCall)}
	}
	b.ReportAllocs()
	cpu := CPUTime()
	for b.Loop() {
		for _, r := range reqs {
			r.err = nil
		}
		if err := s.commitBatchForBench(reqs); err != nil {
			b.Fatal(err)
		}
	}
	ReportCPU(b, cpu)
	b.ReportMetric(float64(b.N*calls*perCall)/b.Elapsed().Seconds(), "events/s")
}

// openBatchBench opens a store for benchmarks that commit batches
// themselves, from the benchmark's goroutine: the writer goroutine runs but
// stays idle, since the benchmark appends nothing through AppendEvents.
func openBatchBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(context.Background(), Options{Path: b.TempDir() + "/kerneld.db"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// commitBatchForBench commits reqs as the writer commits a batch.
func (s *Store) commitBatchForBench(reqs []*writeReq) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.writeBatch(reqs)
}
