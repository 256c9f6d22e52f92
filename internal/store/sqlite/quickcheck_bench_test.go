package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// BenchmarkQuickCheck measures what running PRAGMA quick_check (and
// integrity_check) at every Open would cost, beside Open itself, on
// kerneld databases of the sizes in KERNELD_BENCH_QUICKCHECK_MB (a comma
// list, e.g. "100,1000") that AppendEvents filled. It is skipped without
// that variable, since building a gigabyte takes most of a minute.
// KERNELD_BENCH_QUICKCHECK_DIR keeps the databases between runs, and
// KERNELD_BENCH_DROP_CACHES=1 (root only) drops the page cache before each
// operation, as after a reboot:
//
//	KERNELD_BENCH_QUICKCHECK_MB=100,1000 KERNELD_BENCH_QUICKCHECK_DIR=/tmp/qc \
//	  go test -run '^$' -bench QuickCheck -benchtime 3x ./internal/store/sqlite/
func BenchmarkQuickCheck(b *testing.B) {
	sizes := os.Getenv("KERNELD_BENCH_QUICKCHECK_MB")
	if sizes == "" {
		b.Skip("set KERNELD_BENCH_QUICKCHECK_MB, e.g. 100,1000")
	}
	dir := os.Getenv("KERNELD_BENCH_QUICKCHECK_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	for s := range strings.SplitSeq(sizes, ",") {
		mb, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("KERNELD_BENCH_QUICKCHECK_MB: %v", err)
		}
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			path := filepath.Join(dir, fmt.Sprintf("kerneld-%dmb.db", mb))
			if _, err := os.Stat(path); err != nil {
				buildDB(b, path, int64(mb)<<20)
			}
			b.Run("Open", func(b *testing.B) { benchOpen(b, path) })
			b.Run("QuickCheck", func(b *testing.B) { benchCheck(b, path, "quick_check") })
			b.Run("IntegrityCheck", func(b *testing.B) { benchCheck(b, path, "integrity_check") })
		})
	}
}

// dropCaches empties the page cache if KERNELD_BENCH_DROP_CACHES=1.
func dropCaches(b *testing.B) {
	if os.Getenv("KERNELD_BENCH_DROP_CACHES") != "1" {
		return
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		b.Fatalf("drop caches: %v", err)
	}
}

// benchOpen opens and closes the store, as a restart does.
func benchOpen(b *testing.B, path string) {
	for b.Loop() {
		b.StopTimer()
		dropCaches(b)
		b.StartTimer()
		st, err := sqlite.Open(b.Context(), sqlite.Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCheck runs the check pragma on a fresh read-only connection.
func benchCheck(b *testing.B, path, pragma string) {
	for b.Loop() {
		b.StopTimer()
		dropCaches(b)
		b.StartTimer()
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			b.Fatal(err)
		}
		var res string
		err = db.QueryRowContext(b.Context(), "PRAGMA "+pragma).Scan(&res)
		_ = db.Close() // read-only
		if err != nil || res != "ok" {
			b.Fatalf("%s = %q, %v", pragma, res, err)
		}
	}
}

// buildDB fills a new kerneld database at path through AppendEvents until
// the file holds size bytes: 1000 sessions, 64 writers appending 64 token
// events a call.
func buildDB(b *testing.B, path string, size int64) {
	start := time.Now()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = mustCreateSession(b, st).ID
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			batch := make([]session.Event, 64)
			for n := 0; !done.Load(); n++ {
				id := ids[(w+64*n)%len(ids)]
				for i := range batch {
					batch[i] = tokenEvent(id, n*64+i)
				}
				if err := appendEvents(context.Background(), st, batch); err != nil {
					b.Error(err)
					done.Store(true)
				}
			}
		})
	}
	for !done.Load() {
		time.Sleep(100 * time.Millisecond)
		// The database file alone: the checkpointer keeps copying the WAL
		// into it, and Close copies the rest.
		if fi, err := os.Stat(path); err == nil && fi.Size() >= size {
			done.Store(true)
		}
	}
	wg.Wait()
	stats := st.Stats()
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s: %d bytes, %d events in %s", path, fi.Size(), stats.Events, time.Since(start).Round(time.Millisecond))
}
