package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) kernel.Store {
		return mustOpen(b, sqlite.Options{Path: tempPath(b)})
	})
}

// BenchmarkAppendConcurrentSessions appends the way the kernel does while
// sessions stream: one goroutine per session, one TEXT_MESSAGE_CONTENT
// event per AppendEvents call, each waiting until its event is durable.
func BenchmarkAppendConcurrentSessions(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchAppendSessions(b, n, 1) })
	}
}

// BenchmarkAppendCoalescedTokens is BenchmarkAppendConcurrentSessions with
// 16 events per AppendEvents call, as if each session appended the tokens
// that arrived while its previous append was committing in one call. Each
// session's events then share WAL pages, which single-event calls cannot.
func BenchmarkAppendCoalescedTokens(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchAppendSessions(b, n, 16) })
	}
}

// benchAppendSessions runs one goroutine per session, each appending
// calls of perCall events until b.N events are appended in all.
func benchAppendSessions(b *testing.B, sessions, perCall int) {
	st := mustOpen(b, sqlite.Options{Path: tempPath(b)})
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = mustCreateSession(b, st).ID
	}
	ctx := b.Context()
	var left atomic.Int64 // events still to append, shared by all sessions
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := sqlite.CPUTime()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			batch := make([]session.Event, perCall)
			ev := tokenEvent(id, 0)
			for left.Add(-int64(perCall)) > -int64(perCall) {
				for i := range batch {
					batch[i] = ev
				}
				if err := appendEvents(ctx, st, batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	sqlite.ReportCPU(b, cpu)
	stats := st.Stats()
	b.ReportMetric(float64(stats.Events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(stats.Events)/float64(stats.Commits), "events/commit")
}

// BenchmarkCreateSession creates sessions one after another, each its own
// transaction.
func BenchmarkCreateSession(b *testing.B) {
	st := mustOpen(b, sqlite.Options{Path: tempPath(b)})
	b.ReportAllocs()
	cpu := sqlite.CPUTime()
	for b.Loop() {
		mustCreateSession(b, st)
	}
	sqlite.ReportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkCreateSessionConcurrent creates sessions from 50 goroutines at
// once, as a burst of POST /sessions does, and reports the rate and the
// latency of one CreateSession call (p50, p99). With appenders=50, as many
// other sessions stream single events meanwhile, as runs in flight do.
func BenchmarkCreateSessionConcurrent(b *testing.B) {
	for _, appenders := range []int{0, 50} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			benchCreateConcurrent(b, 50, appenders)
		})
	}
}

func benchCreateConcurrent(b *testing.B, callers, appenders int) {
	st := mustOpen(b, sqlite.Options{Path: tempPath(b)})
	stop := streamEvents(b, st, appenders)
	sessions := make([]session.Session, b.N)
	for i := range sessions {
		id, now := newID(), time.Now().UTC()
		sessions[i] = session.Session{ID: id, Tenant: "acme", Agent: "helper",
			State: session.StateActive, RootID: id, CreatedAt: now, UpdatedAt: now}
	}
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	cpu, wait := sqlite.CPUTime(), sqlite.RunQueueWait()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				start := time.Now()
				if err := st.CreateSession(ctx, sessions[i]); err != nil {
					b.Error(err)
					return
				}
				latencies[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	sqlite.ReportCPU(b, cpu)
	sqlite.ReportRunQueueWait(b, wait)
	stop()
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(quantile(latencies, 0.50).Seconds()*1e3, "p50-ms")
	b.ReportMetric(quantile(latencies, 0.99).Seconds()*1e3, "p99-ms")
	if stats := st.Stats(); stats.Batches > 0 {
		b.ReportMetric(float64(stats.Writes)/float64(stats.Batches), "writes/commit")
	}
}

// quantile returns the q quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// streamEvents starts n goroutines, each appending single token events to
// a session of its own until the returned stop is called.
func streamEvents(b *testing.B, st *sqlite.Store, n int) (stop func()) {
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	for range n {
		id := mustCreateSession(b, st).ID
		wg.Go(func() {
			batch := make([]session.Event, 1)
			for i := 0; ctx.Err() == nil; i++ {
				batch[0] = tokenEvent(id, i)
				if err := appendEvents(ctx, st, batch); err != nil && ctx.Err() == nil {
					b.Error(err)
					return
				}
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// BenchmarkReplay10k reads a 10,000-event backlog, as a subscriber
// resuming from the start of a long session does.
func BenchmarkReplay10k(b *testing.B) {
	const backlog = 10_000
	st := mustOpen(b, sqlite.Options{Path: tempPath(b)})
	id := mustCreateSession(b, st).ID
	ctx := b.Context()
	for i := 0; i < backlog; i += 100 {
		batch := make([]session.Event, 100)
		for j := range batch {
			batch[j] = tokenEvent(id, i+j)
		}
		if err := appendEvents(ctx, st, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		evs, err := st.ReadEvents(ctx, id, 0, 0)
		if err != nil || len(evs) != backlog {
			b.Fatalf("read %d events, err %v", len(evs), err)
		}
	}
	b.ReportMetric(float64(b.N*backlog)/b.Elapsed().Seconds(), "events/s")
}
