// Package scheduletest gives the tests of schedules what stands at the
// schedule package's edges: a settable clock, and a Runner that records
// the runs it is asked for and, as the kernel does, starts one run per
// idempotency key. It must not be imported outside tests.
package scheduletest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// Clock is a settable time source; its Now is safe for concurrent use.
type Clock struct{ now atomic.Int64 } // unix micros

// NewClock returns a clock at 2026-03-01 09:00 UTC.
func NewClock() *Clock {
	c := &Clock{}
	c.Set(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	return c
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.now.Store(t.UnixMicro()) }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.UnixMicro(c.now.Load()).UTC() }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Runner implements schedule.Runner. Its methods are safe for concurrent
// use.
type Runner struct {
	// Fired hears of each run started, once per idempotency key.
	Fired chan schedule.RunRequest
	// Entered hears of each Run that waits at the gate (see SetGate).
	Entered chan struct{}

	mu    sync.Mutex
	calls []schedule.RunRequest
	runs  map[string]string // idempotency key → run id
	fail  map[string]error  // session id → the error its runs get
	gate  chan struct{}
}

// NewRunner returns a runner whose runs all start.
func NewRunner() *Runner {
	return &Runner{runs: map[string]string{}, fail: map[string]error{},
		Fired: make(chan schedule.RunRequest, 1000), Entered: make(chan struct{}, 1000)}
}

// SetGate makes later Runs wait until gate is closed; nil lets them
// through.
func (r *Runner) SetGate(gate chan struct{}) {
	r.mu.Lock()
	r.gate = gate
	r.mu.Unlock()
}

// SetFail makes the runs of session id fail with err; nil lets them
// start again.
func (r *Runner) SetFail(id string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.fail, id)
		return
	}
	r.fail[id] = err
}

// Requests returns the runs asked for so far, in order.
func (r *Runner) Requests() []schedule.RunRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schedule.RunRequest(nil), r.calls...)
}

// Started returns how many runs were started: one per idempotency key.
func (r *Runner) Started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

// Run implements schedule.Runner.
func (r *Runner) Run(ctx context.Context, req schedule.RunRequest) (schedule.RunResult, error) {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		r.Entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return schedule.RunResult{}, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, req)
	if err := r.fail[req.SessionID]; err != nil {
		return schedule.RunResult{}, err
	}
	id, seen := r.runs[req.IdempotencyKey]
	if !seen {
		id = session.NewID()
		r.runs[req.IdempotencyKey] = id
		r.Fired <- req
	}
	return schedule.RunResult{RunID: id, Queued: req.IfBusy == "queue"}, nil
}
