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

// ReportRunQueueWait reports the share of the benchmark's time that the
// process's threads spent waiting for a CPU since RunQueueWait returned
// start. It can pass 100 when several threads wait at once.
func ReportRunQueueWait(b *testing.B, start time.Duration) {
	now := RunQueueWait()
	if now == 0 {
		return // not measured here
	}
	b.ReportMetric(100*(now-start).Seconds()/b.Elapsed().Seconds(), "runq-wait-%")
}
