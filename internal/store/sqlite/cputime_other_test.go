//go:build !linux

package sqlite

import "time"

// CPUTime is 0 where it is not measured; benchmarks then skip it.
func CPUTime() time.Duration { return 0 }

// RunQueueWait is 0 where it is not measured; benchmarks then skip it.
func RunQueueWait() time.Duration { return 0 }
