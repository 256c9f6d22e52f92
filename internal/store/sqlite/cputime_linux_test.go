package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kerneld/kerneld/internal/store/storetest"
)

// CPUTime returns the CPU time the process has used, user and system.
// Benchmarks report it per op beside ns/op, which on a shared machine
// measures the wait for a core as much as the work.
func CPUTime() time.Duration { return storetest.CPUTime() }

// RunQueueWait returns how long the process's threads have been runnable
// but waiting for a CPU, summed over the threads (the second field of
// /proc/self/task/*/schedstat). Latency benchmarks report it: a thread
// the kernel does not run stalls every caller behind it, however little
// the store asks of the CPU.
func RunQueueWait() time.Duration {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var sum time.Duration
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread has exited
		}
		var running, waiting int64
		if _, err := fmt.Sscan(string(b), &running, &waiting); err == nil {
			sum += time.Duration(waiting)
		}
	}
	return sum
}
