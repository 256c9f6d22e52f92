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
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// BenchmarkStreamingSessions measures events appended per second to the
// SQLite store by sessions streaming at once: each runs the echo agent on
// a 200-word input (about 205 events: 200 tokens, the echoed input, the
// run's start and end), as fast as the model produces tokens.
func BenchmarkStreamingSessions(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchStreaming(b, n) })
	}
}

func benchStreaming(b *testing.B, n int) {
	db, err := sqlite.Open(b.Context(), sqlite.Options{Path: filepath.Join(b.TempDir(), "kerneld.db")})
	if err != nil {
		b.Fatal(err)
	}
	k, rec := newKernel(b, kerneltest.Options{Store: db})
	b.Cleanup(func() { _ = db.Close() }) // after the kernel's own cleanup closed it
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
