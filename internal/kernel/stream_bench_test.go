package kernel_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// BenchmarkStreamingSessions measures events appended per second to the
// log by sessions streaming at once, on the memory store and on SQLite:
// each session runs the echo agent on a 200-word input (about 205 events:
// 200 tokens, the echoed input, the run's start and end), as fast as the
// model produces tokens. The default -benchtime gives the 1-session case
// hundreds of runs; 1000 sessions get one or two rounds.
func BenchmarkStreamingSessions(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) kernel.Store
	}{
		{"memory", func(*testing.B) kernel.Store { return memory.New() }},
		{"sqlite", func(b *testing.B) kernel.Store { return openSQLite(b) }},
	}
	for _, st := range stores {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("store=%s/sessions=%d", st.name, n), func(b *testing.B) {
				benchStreaming(b, st.open(b), n)
			})
		}
	}
}

// openSQLite opens a SQLite store in a temporary directory. It is closed
// when tb ends, after the kernel's own cleanup has closed the kernel.
func openSQLite(tb testing.TB) kernel.Store {
	db, err := sqlite.Open(tb.Context(), sqlite.Options{Path: filepath.Join(tb.TempDir(), "kerneld.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

func benchStreaming(b *testing.B, st kernel.Store, n int) {
	k, rec := newKernel(b, kerneltest.Options{Store: st})
	input := strings.TrimSpace(strings.Repeat("token ", 200))
	var events int64
	for b.Loop() {
		b.StopTimer()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = mustSession(b, k.Kernel, "echo").ID
		}
		before := lastSeqs(b, k.Kernel, ids)
		b.StartTimer()
		runAll(b, k.Kernel, rec, ids, input)
		b.StopTimer()
		events += lastSeqs(b, k.Kernel, ids) - before
		b.StartTimer()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// runAll starts a run in every session at once and waits for them all.
func runAll(b *testing.B, k *kernel.Kernel, rec *recorder, ids []string, input string) {
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			run := mustRun(b, k, id, input)
			if end := rec.WaitRunEnd(b, id, run.ID); end.Type != session.EventRunFinished {
				b.Errorf("run ended with %s", end.Type)
			}
		})
	}
	wg.Wait()
}

func lastSeqs(b *testing.B, k *kernel.Kernel, ids []string) int64 {
	var total int64
	for _, id := range ids {
		total += mustGet(b, k, id).LastSeq
	}
	return total
}
