//go:build unix

package storetest

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time the process has used, user and system, or
// 0 where it is not measured. The benchmarks report it per op beside
// ns/op, which on a shared machine measures the wait for a core as much
// as the work.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
