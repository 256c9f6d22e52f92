//go:build !unix

package sqlite

import "time"

// CPUTime is 0 where it is not measured; benchmarks then skip it.
func CPUTime() time.Duration { return 0 }
