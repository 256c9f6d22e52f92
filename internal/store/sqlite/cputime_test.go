package sqlite

import (
	"testing"
	"time"
)

// ReportCPU reports the CPU time used since start per op, if measured.
func ReportCPU(b *testing.B, start time.Duration) {
	if start > 0 {
		b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
	}
}
