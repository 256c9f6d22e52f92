package quota

import (
	"context"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// localRuns counts this process's runs per tenant, executing or reserved
// by a request about to start one, and publishes the counts to the
// backend: at once when they change, and every publishEvery while they
// are not zero, so that a shared backend can drop the counts of a process
// that stopped (see Backend.Runs). Changes never wait on the backend.
type localRuns struct {
	backend Backend
	every   time.Duration

	mu    sync.Mutex
	count map[string]int
	dirty map[string]bool

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newLocalRuns(b Backend, every time.Duration) *localRuns {
	r := &localRuns{backend: b, every: every, count: make(map[string]int), dirty: make(map[string]bool),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.publishLoop()
	return r
}

func (r *localRuns) close() {
	r.cancel()
	<-r.done
}

// add changes tenant's count by d and has it published.
func (r *localRuns) add(tenant string, d int) {
	r.mu.Lock()
	r.count[tenant] += d
	r.dirty[tenant] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// reserve takes a run of tenant if fewer than limit run in all (limit 0:
// no limit); release gives it back.
func (r *localRuns) reserve(ctx context.Context, tenant string, limit int) (release func(), err error) {
	if limit <= 0 {
		return func() {}, nil
	}
	r.mu.Lock()
	r.count[tenant]++
	local := r.count[tenant]
	r.mu.Unlock()
	release = func() { r.add(tenant, -1) }
	total, ok, err := r.backend.Runs(ctx, tenant, local, limit)
	if err != nil || !ok {
		release()
		if err == nil {
			err = exceeded(errdefs.CodeQuotaExceeded, LimitConcurrentRuns, retryRunsAfter,
				"this tenant has %d runs executing or starting, the most it may; retry when one ends", total)
		}
		return nil, err
	}
	return release, nil
}

// total returns tenant's runs across every process.
func (r *localRuns) total(ctx context.Context, tenant string) (int, error) {
	r.mu.Lock()
	local := r.count[tenant]
	r.mu.Unlock()
	n, _, err := r.backend.Runs(ctx, tenant, local, 0)
	return n, err
}

// publishLoop publishes changed counts, and every count not zero each
// r.every.
func (r *localRuns) publishLoop() {
	defer close(r.done)
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
			r.publish(false)
		case <-tick.C:
			r.publish(true)
		}
	}
}

// publish writes the dirty counts (all of them when all is set) to the
// backend. A count that is zero is forgotten once written.
func (r *localRuns) publish(all bool) {
	r.mu.Lock()
	counts := make(map[string]int, len(r.dirty))
	for tenant, n := range r.count {
		if all || r.dirty[tenant] {
			counts[tenant] = n
		}
	}
	clear(r.dirty)
	r.mu.Unlock()
	for tenant, n := range counts {
		if _, _, err := r.backend.Runs(r.ctx, tenant, n, 0); err != nil {
			continue // the next tick writes it again
		}
		if n == 0 {
			r.mu.Lock()
			if r.count[tenant] == 0 && !r.dirty[tenant] {
				delete(r.count, tenant)
			}
			r.mu.Unlock()
		}
	}
}
