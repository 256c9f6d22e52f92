package kernel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// errLeaseLost stops the runs of a session whose lease this replica lost:
// another replica may own the session now, so they stop without writing.
var errLeaseLost = errors.New("the session's lease was lost")

// owner is this replica's share of the sessions: those whose lease it
// holds, each with the driver goroutine that runs its runs. It renews the
// leases and, when replicas share the store, takes over the sessions of
// replicas that died.
type owner struct {
	k *Kernel

	mu     sync.Mutex
	held   map[string]*held // by session id
	closed bool             // the kernel is closing: no lease is taken any more

	fenced    atomic.Int64 // appends the store refused for a lost lease
	takeovers atomic.Int64 // sessions taken over from a dead replica
	// released carries the sessions other replicas let go as they shut
	// down, to the take-over loop (see recover.go).
	released chan string
}

// held is a session whose lease this replica holds.
type held struct {
	id    string
	token int64         // the lease's fencing token
	wake  chan struct{} // a token when the session's stored state may have changed
	ctx   context.Context
	stop  context.CancelCauseFunc // why the session's runs must stop: shutdown, a lost lease
	done  chan struct{}           // closed once the driver has exited and the lease is released
	// started is set once the driver runs; a held session released before
	// that ends the driver count hold took.
	started atomic.Bool
	// releasing is set as the driver starts to let the lease go: a renewal
	// the store refuses from then on is no news.
	releasing atomic.Bool
	// renewed is when (unix nanoseconds) the last acquire or renewal that
	// succeeded was sent: the lease is sure to live a TTL from then.
	renewed atomic.Int64
	// leftBy is why a run the session's previous owner left unfinished
	// was left, unless the run's record says: session.ResumeCrash when
	// kerneld took the session at startup, session.ResumeTakeover when
	// its owner's lease expired. Set before the driver starts.
	leftBy string
	// What the driver knows of the session's runs, so that it need not
	// list them around every run (see queueEmpty). wakes counts the
	// pokes: anything that may add a run, cancel one or decide for one
	// pokes the driver. emptyAt is the value wakes had when the driver last
	// found no queued run, -1 when it has not; nothingLeft says the run
	// startNew started is the session's only unfinished one, so there is
	// nothing to continue.
	wakes       atomic.Int64
	emptyAt     atomic.Int64
	nothingLeft atomic.Bool

	// Guarded by held.mu:
	mu      sync.Mutex
	active  *activeRun      // the run executing now, if any
	known   map[string]bool // queued runs the driver has seen and announced
	leaving bool            // the driver is releasing the lease: take it anew
	// interrupter is the latest run posted here to interrupt the session's
	// run, until it starts or ends: a run posted before it that the
	// driver starts meanwhile (picked before the interrupter was queued)
	// is interrupted as it starts. See interruptHere.
	interrupter *session.Run
}

func newOwner(k *Kernel) *owner {
	return &owner{k: k, held: make(map[string]*held), released: make(chan string, 64)}
}

// Stats are the owner's figures for metrics.
type Stats struct {
	Leases     int   // sessions whose lease this replica holds
	ActiveRuns int   // runs executing or waiting for approval here
	TakeOvers  int64 // sessions taken over from replicas that died
	Fenced     int64 // appends refused because the lease was lost
}

// Stats reports what this replica owns now.
func (k *Kernel) Stats() Stats {
	o := k.owner
	o.mu.Lock()
	defer o.mu.Unlock()
	st := Stats{Leases: len(o.held), TakeOvers: o.takeovers.Load(), Fenced: o.fenced.Load()}
	for _, h := range o.held {
		h.mu.Lock()
		if h.active != nil {
			st.ActiveRuns++
		}
		h.mu.Unlock()
	}
	return st
}

// get returns the held session id, if this replica holds it and its driver
// is not leaving.
func (o *owner) get(id string) *held {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.held[id]
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leaving {
		return nil
	}
	return h
}

// hold returns session id's held record, taking the lease if this replica
// does not hold it. fresh says the lease was just taken: the caller must
// then start its driver with start. It fails with session.ErrLeaseHeld
// when another replica holds the lease. The caller holds the session's
// stripe lock, which serialises taking and releasing the lease here.
func (o *owner) hold(ctx context.Context, id string) (h *held, fresh bool, err error) {
	if err := o.k.checkOpen(); err != nil {
		return nil, false, err
	}
	for {
		o.mu.Lock()
		h = o.held[id]
		o.mu.Unlock()
		if h == nil {
			break
		}
		if h := o.get(id); h != nil {
			return h, false, nil
		}
		// Its driver is releasing the lease; once it has, take it anew.
		select {
		case <-h.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	sent := time.Now()
	token, err := o.k.store.AcquireLease(ctx, id, o.k.repl.Replica, o.k.repl.LeaseTTL)
	if err != nil {
		return nil, false, err
	}
	hctx, stop := context.WithCancelCause(o.k.ctx)
	h = &held{id: id, token: token, wake: make(chan struct{}, 1), ctx: hctx, stop: stop,
		done: make(chan struct{}), known: make(map[string]bool), leftBy: session.ResumeTakeover}
	h.emptyAt.Store(-1)
	h.renewed.Store(sent.UnixNano())
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		// Close has stopped every held session already: give it back.
		stop(errShutdown)
		_ = o.k.store.ReleaseLease(context.WithoutCancel(ctx), id, token)
		return nil, false, o.k.checkOpen()
	}
	o.held[id] = h
	o.k.wg.Add(1) // for h's driver, counted before Close can wait: start or release ends it
	return h, true, nil
}

// start runs h's driver.
func (o *owner) start(h *held) {
	h.started.Store(true)
	go func() {
		defer o.k.wg.Done()
		o.k.drive(h)
	}()
}

// ensure makes sure someone drives session id: this replica, taking the
// lease if nobody holds it, or the replica that does, which it signals.
func (k *Kernel) ensure(ctx context.Context, id string) error {
	unlock := k.lockSession(id)
	defer unlock()
	return k.ensureLocked(ctx, id)
}

// ensureLocked is ensure for a caller holding the session's stripe lock.
func (k *Kernel) ensureLocked(ctx context.Context, id string) error {
	h, fresh, err := k.owner.hold(ctx, id)
	switch {
	case errors.Is(err, session.ErrLeaseHeld):
		k.changed(id)
		return nil
	case err != nil:
		return err
	case fresh:
		k.owner.start(h)
	default:
		k.changed(id)
	}
	return nil
}

// poke wakes the driver of session id, if this replica holds it.
func (o *owner) poke(id string) {
	o.mu.Lock()
	h := o.held[id]
	o.mu.Unlock()
	if h != nil {
		h.poke()
	}
}

func (h *held) poke() {
	h.wakes.Add(1)
	select {
	case h.wake <- struct{}{}:
	default: // already woken
	}
}

// leave releases session h once its driver has nothing left to run, and
// reports whether it did. Under the session's stripe lock, no local
// request can add work meanwhile; work that another replica adds after the
// check is found by the check that follows the release. A driver whose
// session's context ended, or whose kernel is closing, leaves whatever is
// left: then, unless its lease was lost, the other replicas are told to
// take the session at once.
func (o *owner) leave(h *held) bool {
	unlock := o.k.lockSession(h.id)
	stopping := h.ctx.Err() != nil || o.k.checkOpen() != nil
	var work bool
	var err error
	if stopping || !h.queueEmpty() {
		work, err = o.k.hasWork(context.WithoutCancel(h.ctx), h.id)
	}
	if err == nil && work && !stopping {
		unlock()
		return false
	}
	o.release(h)
	unlock()
	switch {
	case stopping && (err != nil || work) && !errors.Is(context.Cause(h.ctx), errLeaseLost):
		o.k.signal(Signal{Kind: SignalReleased, SessionID: h.id})
	case err == nil && !work && !stopping && o.k.repl.Signals != nil:
		// A replica may have queued a run while the lease was still ours;
		// it signalled us, but we were leaving. Look once more. (Without
		// signals there is no other replica, and a request of this one
		// finds the lease released and takes it.)
		if more, err := o.k.hasWork(context.WithoutCancel(o.k.ctx), h.id); err == nil && more {
			_ = o.k.ensure(context.WithoutCancel(o.k.ctx), h.id) // failures leave it to the take-over scan
		}
	}
	return true
}

// release gives up h's lease, unless it was lost, and forgets h.
func (o *owner) release(h *held) {
	h.releasing.Store(true)
	if !errors.Is(context.Cause(h.ctx), errLeaseLost) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(o.k.ctx), signalTimeout)
		if err := o.k.store.ReleaseLease(ctx, h.id, h.token); err != nil {
			o.k.log.Warn("release lease", "session", h.id, "err", err) // it expires instead
		}
		cancel()
	}
	h.mu.Lock()
	h.leaving = true
	h.mu.Unlock()
	o.mu.Lock()
	if o.held[h.id] == h {
		delete(o.held, h.id)
	}
	o.mu.Unlock()
	h.stop(nil)
	close(h.done)
	if !h.started.Load() {
		o.k.wg.Done() // the driver hold counted never ran
	}
}

// queueEmpty reports whether the driver of h knows that its session has
// no queued run: it found none and nothing poked it since. Its own run
// aside, the session then has no unfinished run either: those a previous
// owner left were taken up as the driver started, and only the holder of
// the lease starts one.
func (h *held) queueEmpty() bool { return h.emptyAt.Load() == h.wakes.Load() }

// sawQueue records what the driver found listing the session's queued
// runs, wakes being the pokes counted before it listed them.
func (h *held) sawQueue(wakes int64, queued int) {
	if queued == 0 {
		h.emptyAt.Store(wakes)
	}
}

// hasWork reports whether session id has runs to run: queued, running or
// waiting for an approval.
func (k *Kernel) hasWork(ctx context.Context, id string) (bool, error) {
	runs, err := k.store.ListRuns(ctx, id, session.RunQuery{Limit: 1,
		States: []session.RunState{session.RunQueued, session.RunRunning, session.RunWaitingInput}})
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return len(runs) > 0, err
}

// renewLoop renews every held lease a third of its TTL apart, until the
// kernel closes. A lease it cannot renew stops its session's runs; so does
// one it could not renew for a whole TTL, which may have expired.
func (o *owner) renewLoop() {
	every := o.k.repl.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-o.k.ctx.Done():
			return
		case <-t.C:
		}
		o.renewAll()
	}
}

// released reports whether h's driver let its lease go, or is letting it
// go.
func released(h *held) bool { return h.releasing.Load() }

// sessions returns the sessions held now.
func (o *owner) sessions() []*held {
	o.mu.Lock()
	defer o.mu.Unlock()
	hs := make([]*held, 0, len(o.held))
	for _, h := range o.held {
		hs = append(hs, h)
	}
	return hs
}

// concurrentRenewals bounds the renewals a pass has in flight at once.
const concurrentRenewals = 64

// renewAll renews every held lease, many at once: one after another, a
// pass over many sessions on a slow or busy store took longer than the
// TTL, and leases expired between their renewals, stopping runs as if
// another replica had taken their sessions.
func (o *owner) renewAll() {
	slots := make(chan struct{}, concurrentRenewals)
	var wg sync.WaitGroup
	for _, h := range o.sessions() {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			o.renew(h)
		})
	}
	wg.Wait()
}

// renew renews h's lease. When the store says the lease is gone, or the
// lease may have expired because no renewal has succeeded for a whole
// TTL (the store is unreachable, or this process was paused), the
// session's runs stop without writing: another replica may own it by now.
func (o *owner) renew(h *held) {
	ttl := o.k.repl.LeaseTTL
	sent := time.Now()
	ctx, cancel := context.WithTimeout(o.k.ctx, ttl/3)
	err := o.k.store.RenewLease(ctx, h.id, h.token, ttl)
	cancel()
	switch {
	case released(h):
		// Its driver let the lease go since the pass took its snapshot of
		// the held sessions: the store refusing the renewal is no news.
	case err == nil:
		h.renewed.Store(sent.UnixNano())
	case errors.Is(err, session.ErrFenced), errors.Is(err, errdefs.ErrNotFound):
		o.k.log.Warn("lease lost: stopping the session's runs without writing", "session", h.id)
		h.stop(errLeaseLost)
	case o.k.ctx.Err() != nil:
	case time.Since(time.Unix(0, h.renewed.Load())) >= ttl:
		o.k.log.Warn("lease not renewed within its TTL: stopping the session's runs without writing",
			"session", h.id, "ttl", ttl, "err", err)
		h.stop(errLeaseLost)
	default:
		o.k.log.Warn("renew lease", "session", h.id, "err", err)
	}
}
