package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// maxCachedSeqs bounds Store.lastSeq. Past it the cache is emptied and
// refills from sessions.last_seq as sessions append again; a bound this
// coarse is enough, since a reload costs one primary-key lookup.
const maxCachedSeqs = 100_000

// appender is the group-commit half of Store. AppendEvents queues a
// request on reqs and waits; one writer goroutine, started by Open and
// stopped by Close, takes whatever is queued and appends it in one
// transaction, so a commit's fixed cost is shared by every event in it.
type appender struct {
	reqs       chan *appendReq
	batchDelay time.Duration
	maxBatch   int

	// sendMu is held for reading while a request is sent on reqs and for
	// writing while reqs is closed, so no send can race the close.
	sendMu sync.RWMutex
	closed bool
	wg     sync.WaitGroup // the writer goroutine

	counters

	// failure is the error of the writer's last transaction, nil once one
	// commits again. Ping reports it: reads can go on succeeding while
	// every append fails (a full disk, a read-only remount, an I/O error).
	failure atomic.Pointer[error]

	// Owned by the writer goroutine and reused from batch to batch.
	batch   []*appendReq
	pending map[string]int64 // last seq per session within the batch
	rows    []eventRow
	args    []any
}

// Request states. The caller and the writer race to move a request out of
// reqQueued; whoever wins decides whether the events are appended.
const (
	reqQueued    int32 = iota
	reqTaken           // the writer has it; the caller waits for its outcome
	reqAbandoned       // the caller's ctx ended first; the writer skips it
)

// appendReq is one AppendEvents call.
type appendReq struct {
	evs   []session.Event // read by the writer, written by nobody until done
	state atomic.Int32
	done  chan struct{} // closed by the writer once first and err are set
	first int64         // the seq of evs[0]
	err   error
}

func (a *appender) init(opts Options) {
	a.batchDelay = opts.BatchDelay
	if a.batchDelay <= 0 {
		a.batchDelay = DefaultBatchDelay
	}
	a.maxBatch = opts.MaxBatch
	if a.maxBatch <= 0 {
		a.maxBatch = DefaultMaxBatch
	}
	// As deep as a batch, so that a batch's worth of callers can queue
	// while the previous batch commits.
	a.reqs = make(chan *appendReq, a.maxBatch)
	a.pending = make(map[string]int64)
}

// enqueue hands r to the writer, or fails if the store is closed or ctx
// ends while the queue is full.
func (a *appender) enqueue(ctx context.Context, r *appendReq) error {
	a.sendMu.RLock()
	defer a.sendMu.RUnlock()
	if a.closed {
		return errdefs.New(errdefs.ErrUnavailable, "store_closed", "store is closed")
	}
	select {
	case a.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) startAppender() { s.wg.Go(s.runAppender) }

// stopAppender closes the queue and waits for the writer to commit what
// was queued before and exit.
func (s *Store) stopAppender() {
	s.sendMu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.sendMu.Unlock()
	s.wg.Wait()
}

// runAppender is the writer goroutine. It runs until reqs is closed and
// drained.
func (s *Store) runAppender() {
	var next *appendReq
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
// then whatever else is queued, up to maxBatch events. It returns the
// request that did not fit, to start the following batch, and false once
// reqs is closed and drained.
//
// When the queue runs dry it waits, at most batchDelay, only while the
// batch holds fewer requests than the previous one (expect): those
// callers were just answered and are likely appending again, while a lone
// caller gains nothing from waiting.
func (s *Store) collect(first *appendReq, expect int) (batch []*appendReq, carry *appendReq, open bool) {
	if first == nil {
		var ok bool
		if first, ok = <-s.reqs; !ok {
			return nil, nil, false
		}
	}
	batch = s.batch[:0] // reuse the last batch's array
	batch = append(batch, first)
	defer func() { s.batch = batch }()
	n := len(first.evs)
	var timeout <-chan time.Time
	for n < s.maxBatch {
		r, ok, more := s.next(&timeout, len(batch) < expect)
		if !more {
			return batch, nil, true
		}
		if !ok {
			return batch, nil, false
		}
		if n+len(r.evs) > s.maxBatch {
			return batch, r, true
		}
		batch = append(batch, r)
		n += len(r.evs)
	}
	return batch, nil, true
}

// next returns the next queued request without waiting, or, if wait is
// set, waiting until *timeout (armed on first use). more is false when
// there is nothing to add; ok is false when reqs is closed.
func (s *Store) next(timeout *<-chan time.Time, wait bool) (r *appendReq, ok, more bool) {
	select {
	case r, ok = <-s.reqs:
		return r, ok, true
	default:
	}
	if !wait {
		return nil, true, false
	}
	if *timeout == nil {
		*timeout = time.After(s.batchDelay)
	}
	select {
	case r, ok = <-s.reqs:
		return r, ok, true
	case <-*timeout:
		return nil, true, false
	}
}

// commit appends the batch's requests that their callers have not
// abandoned, then answers each of them.
func (s *Store) commit(batch []*appendReq) {
	live := make([]*appendReq, 0, len(batch))
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	s.writeMu.Lock()
	err := s.writeBatch(live)
	s.writeMu.Unlock()
	s.recordOutcome(err)
	for _, r := range live {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}

// recordOutcome keeps the error of the transaction that just ended, or
// forgets the last one if it committed.
func (a *appender) recordOutcome(err error) {
	if err != nil {
		a.failure.Store(&err)
	} else if a.failure.Load() != nil {
		a.failure.Store(nil)
	}
}

// lastFailure returns the error of the writer's last transaction if it
// failed, else nil.
func (a *appender) lastFailure() error {
	if p := a.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// writeBatch appends the events of reqs in one transaction. A request
// whose session is missing gets its own error and the others go on; any
// other failure fails them all and changes nothing, the cache included.
// The caller holds writeMu.
func (s *Store) writeBatch(reqs []*appendReq) error {
	// Not a caller's context: one caller giving up must not fail the rest.
	ctx := context.Background()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	defer rollback(tx)
	clear(s.pending)
	for _, r := range reqs {
		if err := s.number(ctx, tx, r); err != nil {
			return err
		}
	}
	if err := s.insertEvents(ctx, tx, reqs); err != nil {
		return err
	}
	if err := s.saveLastSeqs(ctx, tx, s.pending); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append events: commit: %w", err)
	}
	s.cacheLastSeqs()
	s.count(reqs)
	return nil
}

// number gives r the seqs that follow its session's last one, taken from
// earlier requests of this batch, the cache or the database, in that
// order. A missing session is r's own error, not the batch's.
func (s *Store) number(ctx context.Context, tx *sql.Tx, r *appendReq) error {
	id := r.evs[0].SessionID
	last, ok := s.pending[id]
	if !ok {
		last, ok = s.lastSeq[id]
	}
	if !ok {
		err := tx.QueryRowContext(ctx, `SELECT last_seq FROM sessions WHERE id = ?`, id).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			r.err = session.SessionNotFound(id)
			return nil
		}
		if err != nil {
			return fmt.Errorf("append events: load last seq of session %s: %w", id, err)
		}
	}
	r.first = last + 1
	s.pending[id] = last + int64(len(r.evs))
	return nil
}

// cacheLastSeqs records the batch's committed last seqs.
func (s *Store) cacheLastSeqs() {
	if len(s.lastSeq)+len(s.pending) > maxCachedSeqs {
		clear(s.lastSeq)
	}
	for id, last := range s.pending {
		s.lastSeq[id] = last
	}
}

// count adds a committed batch to the store's Stats.
func (s *Store) count(reqs []*appendReq) {
	var appends, events int64
	for _, r := range reqs {
		if r.err == nil {
			appends++
			events += int64(len(r.evs))
		}
	}
	s.appends.Add(appends)
	s.events.Add(events)
	s.commits.Add(1)
	s.ckpt.appended(events)
}
