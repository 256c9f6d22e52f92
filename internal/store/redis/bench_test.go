package redis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

// BenchmarkStore runs the benchmarks every store runs, for comparison
// with the memory and SQLite stores.
func BenchmarkStore(b *testing.B) {
	redistest.Require(b)
	storetest.Benchmark(b, func(b *testing.B) kernel.Store { return openStore(b) })
}

// BenchmarkAppend appends batches of token events to sessions appended to
// concurrently, one writer each, as the run loops of as many sessions do.
func BenchmarkAppend(b *testing.B) {
	redistest.Require(b)
	for _, sessions := range []int{1, 100} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("sessions=%d/batch=%d", sessions, batch), func(b *testing.B) {
				benchAppend(b, sessions, batch)
			})
		}
	}
}

func benchAppend(b *testing.B, sessions, batch int) {
	st := openStore(b)
	ctx := b.Context()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = mustCreateSession(b, st).ID
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w, id := range ids {
		n := b.N / sessions
		if w < b.N%sessions {
			n++
		}
		wg.Go(func() {
			evs := tokenEvents(id, "w", batch)
			for range n {
				if err := appendEvents(ctx, st, evs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkTailerLag measures how long an appended event takes to reach a
// tailer following 1 or 1000 sessions: from just before AppendEvents, so
// the append's own round trip is included, to the tailer's deliver. Each
// wake-up costs Redis time in proportion to the streams its XREAD names,
// so more connections mean less lag with many sessions.
func BenchmarkTailerLag(b *testing.B) {
	redistest.Require(b)
	for _, bm := range []struct{ sessions, conns int }{{1, 8}, {1000, 4}, {1000, 8}, {1000, 16}} {
		b.Run(fmt.Sprintf("sessions=%d/conns=%d", bm.sessions, bm.conns), func(b *testing.B) {
			benchLag(b, bm.sessions, bm.conns)
		})
	}
}

// arrival is one delivery: the session and when.
type arrival struct {
	sessionID string
	at        time.Time
}

func benchLag(b *testing.B, sessions, conns int) {
	st := openTailed(b, redistest.Use(b), conns)
	ctx := b.Context()
	arrived := make(chan arrival, 1024)
	tl, err := st.NewTailer(func(evs []session.Event) { arrived <- arrival{evs[0].SessionID, time.Now()} })
	require.NoError(b, err)
	done := make(chan error, 1)
	go func() { done <- tl.Run(context.Background()) }()
	defer func() {
		assert.NoError(b, tl.Close())
		assert.NoError(b, <-done)
	}()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = mustCreateSession(b, st).ID
		tl.Follow(ids[i], 0)
	}
	warm(b, st, ids[0], arrived)

	lags := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		start := time.Now()
		if err := appendEvents(ctx, st, tokenEvents(id, "w", 1)); err != nil {
			b.Fatal(err)
		}
		for a := range arrived {
			if a.sessionID == id {
				lags = append(lags, a.at.Sub(start))
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-µs")
}

// warm appends to session id until the tailer delivers, so the benchmark
// starts with every shard reading.
func warm(b *testing.B, st *redis.Store, id string, arrived <-chan arrival) {
	require.NoError(b, appendEvents(b.Context(), st, tokenEvents(id, "warm", 1)))
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		b.Fatal("the tailer delivered nothing")
	}
}
