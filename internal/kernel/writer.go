package kernel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// maxPending bounds the events a run may have queued but not yet appended;
// past it the run waits, so a model faster than the disk cannot grow
// memory without bound.
const maxPending = 4096

// eventWriter appends one run's events to the log in the background. A run
// streams tokens far faster than a durable store commits one transaction
// each, so the writer appends everything that queued up while its
// previous append was committing in one batch: a session streaming fast
// puts many events in each commit instead of one.
//
// Nothing is weakened by this: observers still see an event only after it
// is durable, in seq order, and flush is the barrier before anything that
// depends on the log (recording a message, running a tool, ending a run).
// The writer's goroutine is owned by the run's goroutine, which closes it.
type eventWriter struct {
	k                *Kernel
	ctx              context.Context // not cancelled with the run: its end must be recorded
	token            int64           // the session's lease: appends are fenced by it
	sessionID, runID string

	mu      sync.Mutex
	cond    *sync.Cond // signalled whenever pending, busy, err or closed change
	pending []session.Event
	busy    bool  // a batch is being appended
	last    int64 // seq of the last event appended
	err     error // the first append failure; nothing is appended after it
	sealed  bool  // the run's terminal event is queued: nothing may follow it
	closed  bool
	// lastQueued is when the last event was queued, or the writer made:
	// the stall watch reads it.
	lastQueued time.Time
	done       chan struct{} // closed when the goroutine exits
}

func newEventWriter(k *Kernel, ctx context.Context, token int64, sessionID, runID string) *eventWriter {
	w := &eventWriter{k: k, ctx: ctx, token: token, sessionID: sessionID, runID: runID, done: make(chan struct{}), lastQueued: k.now()}
	w.cond = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// errSealed refuses an event after the run's end: nothing is logged
// between runs.
var errSealed = errors.New("the run has ended")

// write queues evs, stamped now, for appending; an event that names no
// run is the writer's run's. It is safe for concurrent use. It waits only
// while too many events are pending, and fails once an append has failed
// or the run's end is queued.
func (w *eventWriter) write(evs ...session.Event) error { return w.queue(false, evs) }

// writeLast queues the run's final events; every later write fails.
func (w *eventWriter) writeLast(evs ...session.Event) error { return w.queue(true, evs) }

func (w *eventWriter) queue(last bool, evs []session.Event) error {
	now := w.k.now()
	for i := range evs {
		evs[i].SessionID, evs[i].Time = w.sessionID, now
		if evs[i].RunID == "" {
			evs[i].RunID = w.runID
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.pending) >= maxPending && w.err == nil {
		w.cond.Wait()
	}
	switch {
	case w.err != nil:
		return w.err
	case w.sealed:
		return errSealed
	}
	w.sealed, w.lastQueued = last, now
	w.pending = append(w.pending, evs...)
	w.cond.Broadcast()
	return nil
}

// flush waits until every event written so far is durable and observed,
// and returns the seq of the last one.
func (w *eventWriter) flush() (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for (len(w.pending) > 0 || w.busy) && w.err == nil {
		w.cond.Wait()
	}
	return w.last, w.err
}

// close flushes and stops the goroutine.
func (w *eventWriter) close() error {
	_, err := w.flush()
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.done
	return err
}

// loop appends whatever is pending, batch after batch, until closed.
func (w *eventWriter) loop() {
	defer close(w.done)
	for {
		batch, ok := w.take()
		if !ok {
			return
		}
		err := w.k.append(w.ctx, w.token, batch)
		w.mu.Lock()
		w.busy = false
		if err != nil && w.err == nil {
			w.err = err
		} else if err == nil {
			w.last = batch[len(batch)-1].Seq
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// take waits for pending events and claims them all, or reports that the
// writer is closed. After a failure pending events are dropped: appending
// after a lost batch would log half of something.
func (w *eventWriter) take() ([]session.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.pending) == 0 && !w.closed {
			w.cond.Wait()
		}
		if w.closed {
			return nil, false
		}
		if w.err == nil {
			batch := w.pending
			w.pending, w.busy = nil, true
			return batch, true
		}
		w.pending = nil
		w.cond.Broadcast()
	}
}
