package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// maxPending bounds the events a run may have queued but not yet appended;
// past it the run waits, so a model faster than the disk cannot grow
// memory without bound.
const maxPending = 4096

// idleGap is how long a writer must have had nothing to do for the next
// event to count as the first after a pause: it is delivered before the
// run goes on (see eventWriter.queue). A model streaming at reading speed
// leaves gaps this long between its tokens; one streaming from a cache
// leaves none. Shorter, a busy machine's scheduling delays pass for
// pauses, and fifty runs at once each wait for a commit far more often
// than they need to (W2 on SQLite lost a third of its throughput at 2 ms).
const idleGap = 20 * time.Millisecond

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
//
// Batches grow only while an append is in flight, never by waiting: the
// run's first token, and the first event after a pause, are delivered
// before the run goes on, so a client sees them at once however long the
// answer is, and however the scheduler favours a model streaming at full
// speed over the goroutines that carry events to clients. Deltas of one
// message that queue up behind an append are merged (see merge.go).
//
// A store that cannot take the append for now (unreachable, out of space:
// errdefs.ErrUnavailable) pauses the run rather than ending it: the writer
// tries again, with growing waits, for up to a lease TTL, first checking
// whether the batch it sent landed after all, so nothing is appended
// twice. Past that, or once the session's lease is lost, the append fails
// and the run stops unfinished, to be continued (see runcontinue.go).
type eventWriter struct {
	k                *Kernel
	ctx              context.Context // not cancelled with the run: its end must be recorded
	giveUp           <-chan struct{} // closed when the session is lost or cut: retrying is over
	token            int64           // the session's lease: appends are fenced by it
	sessionID, runID string

	mu      sync.Mutex
	cond    *sync.Cond // signalled whenever pending, busy, err or closed change
	pending []session.Event
	busy    bool  // a batch is being appended
	last    int64 // seq of the last event of the session's log known durable
	err     error // the first append failure; nothing is appended after it
	sealed  bool  // the run's terminal event is queued: nothing may follow it
	closed  bool
	// lastQueued is when the last event was queued, or the writer made:
	// the stall watch reads it.
	lastQueued time.Time
	// sentDelta is set once a delta of the run was queued: the first one
	// is delivered before the run goes on.
	sentDelta bool
	prompt    bool // see writerPolicy
	merger    deltaMerger
	done      chan struct{} // closed when the goroutine exits
}

// writerPolicy says how a writer batches.
type writerPolicy struct {
	// prompt delivers the run's first delta, and the first event after a
	// pause, before the run goes on. Runs always do; some tests of
	// batching need writes that never wait for the store.
	prompt bool
	// mergeDeltas merges deltas that queue up behind an append (merge.go).
	mergeDeltas bool
}

// newEventWriter returns the writer of ar, a run of the session h holds,
// whose log ends at seq last.
func newEventWriter(k *Kernel, ar *activeRun, h *held, last int64, p writerPolicy) *eventWriter {
	w := &eventWriter{k: k, ctx: context.WithoutCancel(ar.ctx), giveUp: h.ctx.Done(), token: h.token,
		sessionID: ar.run.SessionID, runID: ar.run.ID, last: last, done: make(chan struct{}), lastQueued: k.now(),
		prompt: p.prompt, merger: deltaMerger{on: p.mergeDeltas}}
	w.cond = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// errSealed refuses an event after the run's end: nothing is logged
// between runs.
var errSealed = errors.New("the run has ended")

// write queues evs, stamped now, for appending; an event that names no
// run is the writer's run's. Only the run's goroutine calls it. It waits
// while too many events are pending, and for the run's first delta and
// the first event after a pause to be delivered; it fails once an append
// has failed or the run's end is queued.
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
	for len(w.pending) >= maxPending && w.err == nil {
		w.cond.Wait()
	}
	switch {
	case w.err != nil:
		err := w.err
		w.mu.Unlock()
		return err
	case w.sealed:
		w.mu.Unlock()
		return errSealed
	}
	urgent := w.urgentLocked(now, evs)
	w.sealed, w.lastQueued = last, now
	for _, ev := range evs {
		w.pending = w.merger.add(w.pending, ev)
	}
	w.cond.Broadcast()
	if !urgent {
		w.mu.Unlock()
		return nil
	}
	err := w.waitLocked()
	w.mu.Unlock()
	// The events are with the observers, whose streams were woken: let
	// them write before the run goes on. On one CPU a model streaming at
	// full speed would otherwise keep them waiting for a time slice.
	runtime.Gosched()
	return err
}

// urgentLocked reports whether evs, queued at now, are to be delivered
// before the run goes on: the writer is idle and they hold the run's
// first delta, or come after a pause. Otherwise the writer is busy and
// they join the next batch, or it is about to take them at once.
func (w *eventWriter) urgentLocked(now time.Time, evs []session.Event) bool {
	first := false
	if !w.sentDelta {
		first = slices.ContainsFunc(evs, func(ev session.Event) bool { return ev.Type.IsDelta() })
		w.sentDelta = first
	}
	idle := !w.busy && len(w.pending) == 0
	return w.prompt && idle && (first || now.Sub(w.lastQueued) >= idleGap)
}

// waitLocked waits until every event queued so far is durable and
// observed, or an append failed.
func (w *eventWriter) waitLocked() error {
	for (len(w.pending) > 0 || w.busy) && w.err == nil {
		w.cond.Wait()
	}
	return w.err
}

// flush waits until every event written so far is durable and observed,
// and returns the seq of the last one.
func (w *eventWriter) flush() (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.waitLocked()
	return w.last, err
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
		err := w.appendBatch(batch)
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
			batch := w.merger.finishBatch(w.pending)
			w.pending, w.busy = nil, true
			return batch, true
		}
		w.pending = w.merger.finishBatch(nil)
		w.cond.Broadcast()
	}
}

// The waits between the attempts of an append the store could not take:
// doubling from the first to the last.
const (
	firstAppendWait = 20 * time.Millisecond
	lastAppendWait  = time.Second
)

// appendBatch appends batch, trying again while the store cannot take it
// for now, for up to a lease TTL (see eventWriter).
func (w *eventWriter) appendBatch(batch []session.Event) error {
	err := w.k.append(w.ctx, w.token, batch)
	if !retriable(err) {
		return err
	}
	w.k.log.Warn("the store refused a run's events: retrying", "session", w.sessionID, "run", w.runID, "err", err)
	deadline := time.Now().Add(w.k.repl.LeaseTTL)
	for wait := firstAppendWait; time.Now().Before(deadline); wait = min(2*wait, lastAppendWait) {
		select {
		case <-w.giveUp:
			return err
		case <-time.After(wait):
		}
		landed, lerr := w.landed(batch)
		switch {
		case lerr != nil && retriable(lerr):
			continue // the store still cannot say
		case lerr != nil:
			return lerr
		case landed:
			return nil
		}
		if err = w.k.append(w.ctx, w.token, batch); !retriable(err) {
			return err
		}
	}
	return err
}

// retriable reports whether an append failed because the store cannot
// take it for now, as opposed to refusing it: a lost lease, a session
// gone, a bad batch.
func retriable(err error) bool {
	return err != nil && errors.Is(err, errdefs.ErrUnavailable) && !errors.Is(err, session.ErrFenced)
}

// landed reports whether batch, whose append failed without an answer,
// reached the log after all: the writer is the session's only writer while
// it holds the lease, so the log ends where it left it (it did not land),
// or right after batch (it did: its seqs are filled in and the observers
// told). Any other end means another process writes the session now.
func (w *eventWriter) landed(batch []session.Event) (bool, error) {
	s, err := w.k.store.GetSession(w.ctx, w.sessionID)
	if err != nil {
		return false, fmt.Errorf("get session: %w", err)
	}
	switch s.LastSeq {
	case w.last:
		return false, nil
	case w.last + int64(len(batch)):
		for i := range batch {
			batch[i].Seq = w.last + 1 + int64(i)
		}
		w.k.observe(batch)
		return true, nil
	}
	return false, fmt.Errorf("the log of session %s moved on to seq %d past %d: %w", w.sessionID, s.LastSeq, w.last, session.ErrFenced)
}
