package quota

import (
	"context"
	"sync"
	"time"
)

// Memory is the Backend of one process: counters in maps under one
// mutex, which a check holds for a map lookup and a little arithmetic.
type Memory struct {
	now func() time.Time

	mu       sync.Mutex
	buckets  map[string]*bucket
	counters map[string]*counter
	locks    map[string]chan struct{}
}

type bucket struct {
	tokens float64
	at     time.Time
}

type counter struct {
	n       int64
	expires time.Time
}

// NewMemory returns an empty in-process backend.
func NewMemory() *Memory {
	return &Memory{now: time.Now, buckets: make(map[string]*bucket), counters: make(map[string]*counter),
		locks: make(map[string]chan struct{})}
}

// Take implements Backend.
func (m *Memory) Take(_ context.Context, key string, rate float64, burst int, n int) (Bucket, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[key]
	if !ok {
		b = &bucket{tokens: float64(burst), at: now}
		m.buckets[key] = b
	}
	b.tokens = min(float64(burst), b.tokens+max(0, now.Sub(b.at).Seconds())*rate)
	b.at = now
	if float64(n) > b.tokens {
		return Bucket{Allowed: false, Tokens: b.tokens}, nil
	}
	b.tokens = min(float64(burst), b.tokens-float64(n))
	return Bucket{Allowed: true, Tokens: b.tokens}, nil
}

// Add implements Backend. Expired counters are dropped as the next day's
// are made.
func (m *Memory) Add(_ context.Context, key string, n int64, ttl time.Duration) (int64, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.counters[key]
	if !ok || now.After(c.expires) {
		m.dropExpiredLocked(now)
		c = &counter{expires: now.Add(ttl)}
		m.counters[key] = c
	}
	c.n += n
	return c.n, nil
}

func (m *Memory) dropExpiredLocked(now time.Time) {
	for k, c := range m.counters {
		if now.After(c.expires) {
			delete(m.counters, k)
		}
	}
}

// Runs implements Backend: this process's runs are all there are.
func (m *Memory) Runs(_ context.Context, _ string, local, limit int) (int, bool, error) {
	if limit > 0 && local > limit {
		return local - 1, false, nil
	}
	return local, true, nil
}

// Lock implements Backend. Its holder is in this process, so ttl does
// not apply.
func (m *Memory) Lock(ctx context.Context, key string, _ time.Duration) (func(), error) {
	m.mu.Lock()
	c, ok := m.locks[key]
	if !ok {
		c = make(chan struct{}, 1)
		m.locks[key] = c
	}
	m.mu.Unlock()
	select {
	case c <- struct{}{}:
		return func() { <-c }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
