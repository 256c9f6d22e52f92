package main

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted, which
// must be in ascending order, by the nearest-rank method: a value that was
// measured, never an interpolation. It returns the zero value for no data.
func percentile[T cmp.Ordered](sorted []T, p float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// sorted returns the durations in ascending order.
func (l *latencies) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.d)
	slices.Sort(out)
	return out
}

// inFlight calls do(i) for every i in [0, n), from width goroutines at
// once, and waits for them all. It stops handing out work at the first
// error or when ctx ends, and returns that error.
func inFlight(ctx context.Context, n, width int, do func(i int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
		failed  atomic.Bool
	)
	for range min(width, n) {
		wg.Go(func() {
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errOnce.Do(func() { first = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
