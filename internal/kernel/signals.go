package kernel

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Replication configures a kernel that shares its store with other
// replicas.
type Replication struct {
	// Replica names this kernel in the leases it holds and the signals it
	// sends; default: the host name, the process id and a random part.
	Replica string
	// Signals carries this kernel's signals to the other replicas; nil when
	// the store is this process's alone.
	Signals Signals
	// LeaseTTL is how long a lease lives without renewal, and so how long a
	// dead replica's sessions wait to be taken over; default 10 s.
	LeaseTTL time.Duration
	// CheckInterval is how often an owner re-reads its sessions' stored
	// state, which catches a lost signal. Default 1 s with Signals; without
	// them nothing is lost and nothing is re-read.
	CheckInterval time.Duration
}

func (r Replication) withDefaults() Replication {
	if r.Replica == "" {
		host, _ := os.Hostname()
		r.Replica = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), session.NewMessageID()[:6])
	}
	if r.LeaseTTL <= 0 {
		r.LeaseTTL = 10 * time.Second
	}
	if r.CheckInterval <= 0 && r.Signals != nil {
		r.CheckInterval = time.Second
	}
	return r
}

// Signal and its kinds are session.Signal's: the stores that carry
// signals between replicas know them from there.
type (
	Signal     = session.Signal
	SignalKind = session.SignalKind
)

// Signal kinds.
const (
	SignalChanged  = session.SignalChanged
	SignalEnded    = session.SignalEnded
	SignalReleased = session.SignalReleased
)

// Signals carries a kernel's signals to the other replicas sharing its
// store. The implementation calls Kernel.Receive with every signal it
// receives.
type Signals interface {
	Publish(ctx context.Context, sig Signal) error
}

// Receive handles a signal from another replica; a replica's own signals
// were handled when it sent them.
func (k *Kernel) Receive(sig Signal) {
	if sig.From != k.repl.Replica {
		k.handle(sig)
	}
}

// signal handles sig here, then sends it to the other replicas.
func (k *Kernel) signal(sig Signal) {
	sig.From = k.repl.Replica
	k.handle(sig)
	if k.repl.Signals == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.ctx), signalTimeout)
	defer cancel()
	if err := k.repl.Signals.Publish(ctx, sig); err != nil {
		// The owner's periodic check finds the change without it.
		k.log.Warn("send signal", "session", sig.SessionID, "kind", string(sig.Kind), "err", err)
	}
}

// signalTimeout bounds sending one signal.
const signalTimeout = 2 * time.Second

// changed tells the session's owner and waiters, on every replica, that
// the session's stored state changed.
func (k *Kernel) changed(sessionID string) {
	k.signal(Signal{Kind: SignalChanged, SessionID: sessionID})
}

func (k *Kernel) handle(sig Signal) {
	switch sig.Kind {
	case SignalChanged:
		k.owner.poke(sig.SessionID)
		k.changes.notify(sig.SessionID)
	case SignalEnded:
		k.changes.notify(sig.SessionID)
		for _, o := range k.observers {
			o.ObserveSessionEnded(sig.SessionID, sig.Seq)
		}
	case SignalReleased:
		if sig.From != k.repl.Replica {
			k.owner.releasedElsewhere(sig.SessionID)
		}
	}
}

// changes wakes the goroutines waiting for a session's stored state to
// change.
type changes struct {
	mu      sync.Mutex
	waiting map[string]chan struct{} // by session id; closed on a change
}

func newChanges() *changes { return &changes{waiting: make(map[string]chan struct{})} }

// next returns a channel closed at the session's next change. Take it
// before reading the state, so no change between the two is missed.
func (c *changes) next(sessionID string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.waiting[sessionID]
	if ch == nil {
		ch = make(chan struct{})
		c.waiting[sessionID] = ch
	}
	return ch
}

// notify wakes everyone waiting on the session.
func (c *changes) notify(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.waiting[sessionID]; ch != nil {
		close(ch)
		delete(c.waiting, sessionID)
	}
}

// pollInterval is how long a waiter waits for a change before it reads
// the stored state anyway: signals between replicas can be lost.
func (k *Kernel) pollInterval() time.Duration {
	if k.repl.Signals != nil {
		return 100 * time.Millisecond
	}
	return time.Second
}

// waitRun waits until run runID of session sessionID satisfies done and
// returns it, or until ctx ends.
func (k *Kernel) waitRun(ctx context.Context, sessionID, runID string, done func(session.Run) bool) (session.Run, error) {
	for {
		change := k.changes.next(sessionID)
		run, err := k.store.GetRun(ctx, sessionID, runID)
		if err != nil || done(run) {
			return run, err
		}
		if err := k.awaitChange(ctx, change); err != nil {
			return run, err
		}
	}
}

// awaitChange waits for change, the poll interval, or ctx to end.
func (k *Kernel) awaitChange(ctx context.Context, change <-chan struct{}) error {
	t := time.NewTimer(k.pollInterval())
	defer t.Stop()
	select {
	case <-change:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ended reports whether a run has ended.
func ended(r session.Run) bool { return r.State.Terminal() }
