package sqlite

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// writer is the group-commit half of Store. Every write method queues a
// request on reqs and waits; one writer goroutine, started by Open and
// stopped by Close, takes whatever is queued and writes it in one
// transaction, so a commit's fixed cost is shared by every call in it,
// then answers each caller. A burst of session creates or a thousand
// streaming sessions costs one commit per batch, not one per call, and
// callers wait in the order they queued rather than in whatever order the
// connection pool hands out its one connection.
type writer struct {
	reqs       chan *writeReq
	batchDelay time.Duration
	maxBatch   int

	// sendMu is held for reading while a request is sent on reqs and for
	// writing while reqs is closed, so no send can race the close.
	sendMu sync.RWMutex
	closed bool
	wg     sync.WaitGroup // the writer goroutine

	// writeMu is held by the writer goroutine while it writes a batch, the
	// only time it uses its connection. Nothing else writes; Diagnose
	// holds it to query the connection, tests to keep calls queued.
	writeMu sync.Mutex

	counters

	// failure is the error of the writer's last transaction, nil once one
	// commits again. Ping reports it: reads can go on succeeding while
	// every write fails (a full disk, a read-only remount, an I/O error).
	failure atomic.Pointer[error]

	// Owned by the writer goroutine and reused from batch to batch.
	batch []*writeReq
	tx    batchTx
}

// Request states. The caller and the writer race to move a request out of
// reqQueued; whoever wins decides whether the call is written.
const (
	reqQueued    int32 = iota
	reqTaken           // the writer has it; the caller waits for its outcome
	reqAbandoned       // the caller's ctx ended first; the writer skips it
)

// writeReq is one write call: an AppendEvents call (evs) or any other
// write (op).
type writeReq struct {
	evs   []session.Event // read by the writer, written by nobody until done
	token int64           // the lease evs are appended under
	op    writeOp
	state atomic.Int32
	done  chan struct{} // closed by the writer once first and err are set
	first int64         // the seq of evs[0]
	err   error
}

// writeOp runs one call's statements in the writer's transaction. own is
// the call's own failure, after which the call has changed nothing and the
// other calls of the batch go on (a duplicate id, a missing session); err
// is a failure of the database, which rolls back the whole transaction.
type writeOp func(tx *batchTx) (own, err error)

// size is what r counts towards Options.MaxBatch.
func (r *writeReq) size() int { return max(len(r.evs), 1) }

func (w *writer) init(opts Options) {
	w.batchDelay = opts.BatchDelay
	if w.batchDelay <= 0 {
		w.batchDelay = DefaultBatchDelay
	}
	w.maxBatch = opts.MaxBatch
	if w.maxBatch <= 0 {
		w.maxBatch = DefaultMaxBatch
	}
	// As deep as a batch, so that a batch's worth of callers can queue
	// while the previous batch commits.
	w.reqs = make(chan *writeReq, w.maxBatch)
	w.tx.init()
}

// write runs op in the writer's next transaction and returns once that
// has committed, with the cancellation rules of AppendEvents.
func (s *Store) write(ctx context.Context, op writeOp) error {
	return s.submit(ctx, &writeReq{op: op, done: make(chan struct{})})
}

// submit queues r and waits for its outcome. If ctx ends while r is still
// queued, r is never written and submit returns ctx.Err(); once the
// writer has taken r, submit reports how it turned out.
func (s *Store) submit(ctx context.Context, r *writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enqueue(ctx, r); err != nil {
		return err
	}
	return r.await(ctx)
}

// enqueue hands r to the writer, or fails if the store is closed or ctx
// ends while the queue is full.
func (w *writer) enqueue(ctx context.Context, r *writeReq) error {
	w.sendMu.RLock()
	defer w.sendMu.RUnlock()
	if w.closed {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStoreClosed, "store is closed")
	}
	select {
	case w.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits for the writer's outcome for r, or for ctx to end while r
// is still queued, and on success writes the seqs into r's events.
func (r *writeReq) await(ctx context.Context) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return ctx.Err()
		}
		<-r.done // taken: the outcome is at most one commit away
	}
	if r.err != nil {
		return r.err
	}
	for i := range r.evs {
		r.evs[i].Seq = r.first + int64(i)
	}
	return nil
}

func (s *Store) startWriter() { s.wg.Go(s.runWriter) }

// stopWriter closes the queue, waits for the writer to commit what was
// queued before and exit, and gives its connection back to the pool.
func (s *Store) stopWriter() {
	s.sendMu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.sendMu.Unlock()
	s.wg.Wait()
	s.tx.close()
}

// runWriter is the writer goroutine. It runs until reqs is closed and
// drained.
func (s *Store) runWriter() {
	var next *writeReq
	expect := 1
	for {
		batch, carry, open := s.collect(next, expect)
		if len(batch) > 0 {
			expect = len(batch)
			s.commit(batch)
			clear(batch) // drop the requests for the collector
		}
		if !open {
			return
		}
		next = carry
	}
}

// collect returns the next batch: first (or the next request queued),
// then whatever else is queued, up to maxBatch events (other writes count
// one each). It returns the request that did not fit, to start the
// following batch, and false once reqs is closed and drained.
//
// When the queue runs dry it yields the CPU once, and looks again: on one
// CPU nothing else runs until the writer blocks, so callers it just
// answered and requests about to write have not queued yet, and a commit
// shared by more calls costs less CPU per call. Then it waits, at most
// batchDelay, only while the batch holds fewer requests than the previous
// one (expect): those callers were just answered and are likely writing
// again, while a lone caller gains nothing from waiting.
func (s *Store) collect(first *writeReq, expect int) (batch []*writeReq, carry *writeReq, open bool) {
	if first == nil {
		var ok bool
		if first, ok = <-s.reqs; !ok {
			return nil, nil, false
		}
	}
	batch = s.batch[:0] // reuse the last batch's array
	batch = append(batch, first)
	defer func() { s.batch = batch }()
	n := first.size()
	var c collecting
	for n < s.maxBatch {
		r, ok, more := s.next(&c, len(batch) < expect)
		if !more {
			return batch, nil, true
		}
		if !ok {
			return batch, nil, false
		}
		if n+r.size() > s.maxBatch {
			return batch, r, true
		}
		batch = append(batch, r)
		n += r.size()
	}
	return batch, nil, true
}

// collecting is where collect is in its batch.
type collecting struct {
	yielded bool             // it has yielded the CPU once
	timeout <-chan time.Time // armed when it first waits
}

// next returns the next queued request, after yielding once (see collect)
// if none is queued; if wait is set, it waits until c.timeout. more is
// false when there is nothing to add; ok is false when reqs is closed.
func (w *writer) next(c *collecting, wait bool) (r *writeReq, ok, more bool) {
	for {
		select {
		case r, ok = <-w.reqs:
			return r, ok, true
		default:
		}
		if c.yielded {
			break
		}
		runtime.Gosched()
		c.yielded = true
	}
	if !wait {
		return nil, true, false
	}
	if c.timeout == nil {
		c.timeout = time.After(w.batchDelay)
	}
	select {
	case r, ok = <-w.reqs:
		return r, ok, true
	case <-c.timeout:
		return nil, true, false
	}
}

// commit writes the batch's requests that their callers have not
// abandoned, then answers each of them.
func (s *Store) commit(batch []*writeReq) {
	live := make([]*writeReq, 0, len(batch))
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	s.writeMu.Lock()
	s.writeAll(live)
	s.writeMu.Unlock()
	for _, r := range live {
		close(r.done)
	}
}

// writeAll writes reqs in one transaction. If that fails, one call's
// statement may be what failed it (a value SQLite refuses, say), so each
// call is then written in a transaction of its own: the others commit and
// only the culprit fails. When the database itself fails (a full disk),
// they all fail, each with the error, as an *errdefs.StorageError when a
// retry may succeed (see unavailable).
func (s *Store) writeAll(reqs []*writeReq) {
	err := s.writeBatch(reqs)
	s.recordOutcome(err)
	if err == nil {
		return
	}
	if len(reqs) == 1 {
		reqs[0].err = unavailable(err)
		return
	}
	for i := range reqs {
		s.writeAll(reqs[i : i+1])
	}
}

// recordOutcome keeps the error of the transaction that just ended, or
// forgets the last one if it committed.
func (w *writer) recordOutcome(err error) {
	if err != nil {
		w.failure.Store(&err)
	} else if w.failure.Load() != nil {
		w.failure.Store(nil)
	}
}

// lastFailure returns the error of the writer's last transaction if it
// failed, else nil.
func (w *writer) lastFailure() error {
	if p := w.failure.Load(); p != nil {
		return *p
	}
	return nil
}
