package main

import (
	"strings"
	"testing"
)

func TestSeqTrack(t *testing.T) {
	tests := []struct {
		name    string
		track   seqTrack
		seqs    []int64
		problem string // in the first problem; "" for none
	}{
		{"AnyFirstWithoutCursor", seqTrack{}, []int64{7, 8, 9}, ""},
		{"FromCursor", seqTrack{last: 4, started: true}, []int64{5, 6}, ""},
		{"FromCursorZero", seqTrack{started: true}, []int64{1, 2}, ""},
		{"GapAfterCursor", seqTrack{last: 4, started: true}, []int64{6}, "gap: seq 6 after seq 4"},
		{"FirstNotOneAfterZeroCursor", seqTrack{started: true}, []int64{3}, "gap: seq 3 after seq 0"},
		{"Gap", seqTrack{}, []int64{1, 2, 4}, "gap: seq 4 after seq 2"},
		{"Duplicate", seqTrack{}, []int64{1, 2, 2}, "duplicate: seq 2 after seq 2"},
		{"Backwards", seqTrack{}, []int64{5, 3}, "duplicate: seq 3 after seq 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := tc.track
			tr.newRead()
			got := ""
			for _, seq := range tc.seqs {
				if p := tr.see(seq); p != "" && got == "" {
					got = p
				}
			}
			if (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
				t.Errorf("problem = %q, want %q", got, tc.problem)
			}
		})
	}
}

func TestGauges(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_gc_duration_seconds{quantile="0"} 1e-05
process_open_fds 2.5e+01
`
	got, err := gauges(strings.NewReader(text), "go_goroutines", "process_open_fds")
	if err != nil || got[0] != 42 || got[1] != 25 {
		t.Errorf("gauges = %v, %v; want [42 25]", got, err)
	}
	if _, err := gauges(strings.NewReader(text), "go_goroutines", "process_max_fds"); err == nil {
		t.Error("a missing series is not reported")
	}
}
