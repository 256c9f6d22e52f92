package kernel_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// countingStore counts the calls a kernel makes to its store: every write,
// and the listings of a session's runs.
type countingStore struct {
	kernel.Store
	writes, lists   atomic.Int64
	creates, starts atomic.Int64 // CreateRun and StartRun calls
}

func (s *countingStore) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	s.writes.Add(1)
	s.creates.Add(1)
	return s.Store.CreateRun(ctx, r, c)
}

func (s *countingStore) UpdateRun(ctx context.Context, r session.Run) error {
	s.writes.Add(1)
	return s.Store.UpdateRun(ctx, r)
}

func (s *countingStore) UpdateSession(ctx context.Context, sess session.Session) error {
	s.writes.Add(1)
	return s.Store.UpdateSession(ctx, sess)
}

func (s *countingStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	s.writes.Add(1)
	return s.Store.AppendEvents(ctx, token, evs)
}

func (s *countingStore) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	s.writes.Add(1)
	return s.Store.AppendMessages(ctx, token, msgs...)
}

func (s *countingStore) ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error) {
	s.lists.Add(1)
	return s.Store.ListRuns(ctx, sessionID, q)
}

// BenchmarkRunStart measures starting a run on an idle session, on each
// store: the time from the request until Run returns with the run
// started (its RUN_STARTED and echoed input durable), and, over the whole
// run (the echo agent's short answer), the store writes other than lease
// calls (writes/run), the listings of the session's runs (listruns/run)
// and, on SQLite, the group commits (commits/run). Redis and PostgreSQL
// run when their test URLs are set.
func BenchmarkRunStart(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) kernel.Store
	}{
		{"memory", func(*testing.B) kernel.Store { return memory.New() }},
		{"sqlite", func(b *testing.B) kernel.Store { return openSQLite(b) }},
		{"redis", func(b *testing.B) kernel.Store {
			srv := redistest.Use(b)
			st, err := redis.Open(b.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"postgres", func(b *testing.B) kernel.Store {
			st, err := postgres.Open(b.Context(), postgres.Options{URL: pgtest.Schema(b)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
	for _, st := range stores {
		b.Run("store="+st.name, func(b *testing.B) { benchRunStart(b, st.open(b)) })
	}
}

func benchRunStart(b *testing.B, db kernel.Store) {
	cs := &countingStore{Store: db}
	k, rec := newKernel(b, kerneltest.Options{Store: cs})
	commits := func() int64 {
		if s, ok := db.(*sqlite.Store); ok {
			return s.Stats().Batches
		}
		return 0
	}
	var writes, lists, batches int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := mustSession(b, k.Kernel, "echo")
		w0, l0, c0 := cs.writes.Load(), cs.lists.Load(), commits()
		b.StartTimer()
		run, _, err := k.Run(b.Context(), s.ID, kernel.RunRequest{Input: "one two three"})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		waitRun(b, k.Kernel, rec, s.ID, run.ID)
		waitReleased(b, k.Kernel)
		writes += cs.writes.Load() - w0
		lists += cs.lists.Load() - l0
		batches += commits() - c0
		b.StartTimer()
	}
	b.ReportMetric(float64(writes)/float64(b.N), "writes/run")
	b.ReportMetric(float64(lists)/float64(b.N), "listruns/run")
	if batches > 0 {
		b.ReportMetric(float64(batches)/float64(b.N), "commits/run")
	}
}

// waitReleased waits until k holds no session's lease: every driver has
// finished with its session.
func waitReleased(b *testing.B, k *kernel.Kernel) {
	deadline := time.Now().Add(waitTimeout)
	for k.Stats().Leases > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("a session is still held after %v", waitTimeout)
		}
		runtime.Gosched()
	}
}
