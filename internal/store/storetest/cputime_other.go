//go:build !unix

package storetest

import "time"

// CPUTime returns 0: the process's CPU time is measured on Unix only.
func CPUTime() time.Duration { return 0 }
