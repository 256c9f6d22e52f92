package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []int
		p      float64
		want   int
	}{
		{"median of 1..100", hundred, 50, 50},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 is the maximum", hundred, 100, 100},
		{"a tiny p is the minimum", hundred, 0.1, 1},
		{"median of three is the middle", []int{10, 20, 30}, 50, 20},
		{"p99 of three is the maximum", []int{10, 20, 30}, 99, 30},
		{"one value", []int{7}, 99, 7},
		{"no values", nil, 50, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %d, want %d", len(tt.sorted), tt.p, got, tt.want)
			}
		})
	}
}

func TestLatencies_Sorted(t *testing.T) {
	var l latencies
	for _, d := range []time.Duration{3, 1, 2} {
		l.add(d * time.Millisecond)
	}
	got := l.sorted()
	if len(got) != 3 || got[0] != time.Millisecond || got[2] != 3*time.Millisecond {
		t.Fatalf("sorted = %v", got)
	}
	if p := percentile(got, 50); p != 2*time.Millisecond {
		t.Errorf("median = %v, want 2ms", p)
	}
}

func TestParseProc(t *testing.T) {
	rss, hwm, err := parseStatus([]byte("Name:\tkerneld\nVmHWM:\t   30000 kB\nVmRSS:\t   25000 kB\nThreads:\t7\n"))
	if err != nil || rss != 25000<<10 || hwm != 30000<<10 {
		t.Errorf("parseStatus = %d, %d, %v; want %d, %d", rss, hwm, err, 25000<<10, 30000<<10)
	}
	// A command name with spaces and a parenthesis must not shift the fields.
	st, err := parseProcStat([]byte("42 (ker ne) d) S 7 42 42 0 -1 4194560 100 0 0 0 150 25 3 4 20 0 9 0 1 2 3"))
	if want := (procStat{ppid: 7, own: 175 * clockTick, waited: 7 * clockTick}); err != nil || st != want {
		t.Errorf("parseProcStat = %+v, %v; want %+v", st, err, want)
	}
	if n := cpuCount("0-3,8,10-11"); n != 7 {
		t.Errorf("cpuCount = %d, want 7", n)
	}
}
