package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// maxBatchEvents bounds the events one append transaction writes; a
// single larger AppendEvents call still commits whole, alone.
const maxBatchEvents = 1024

// appendReq is one AppendEvents call on its way through an appender.
type appendReq struct {
	token int64
	evs   []session.Event
	err   error
	done  chan struct{} // closed once err is set and, on success, the seqs
}

// AppendEvents appends evs, all of one session, numbering them from the
// session's LastSeq + 1, while the session's lease is held with token,
// checked in the transaction that appends them, and writes each seq into
// evs once that transaction has committed. Either the whole call is
// appended or none of it: a call naming more than one session is
// ErrInvalid, an unknown session ErrNotFound, a lease not held with token
// session.ErrFenced, and after Close it is ErrUnavailable.
//
// Calls from many goroutines are committed together (group commit): an
// appender takes every call that queued while it was committing the last
// batch and writes them as one transaction with one multi-row INSERT, so
// a stream of token events costs a commit per batch, not per event.
//
// If ctx ends before the call is queued, it returns ctx.Err() and appends
// nothing; once queued it waits for the transaction's outcome, so it never
// reports a failure for events that were appended.
func (s *Store) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if _, err := session.EventsOfOneSession(evs); err != nil {
		return err
	}
	r := &appendReq{token: token, evs: evs, done: make(chan struct{})}
	if err := s.queue(ctx, r); err != nil {
		return err
	}
	<-r.done
	return r.err
}

// queue hands r to the appenders unless the store is closed or ctx ends
// first.
func (s *Store) queue(ctx context.Context, r *appendReq) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStoreClosed, "append events: the store is closed")
	}
	select {
	case s.appends <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appender writes queued appends, batch after batch, until the store is
// closed and nothing is left queued.
func (s *Store) appender() {
	for {
		select {
		case r := <-s.appends:
			s.writeBatch(s.gather(r))
		case <-s.stop:
			for {
				select {
				case r := <-s.appends:
					s.writeBatch(s.gather(r))
				default:
					return
				}
			}
		}
	}
}

// gather returns first with every call queued behind it, up to
// maxBatchEvents events.
func (s *Store) gather(first *appendReq) []*appendReq {
	batch, n := []*appendReq{first}, len(first.evs)
	for n < maxBatchEvents {
		select {
		case r := <-s.appends:
			batch, n = append(batch, r), n+len(r.evs)
		default:
			return batch
		}
	}
	return batch
}

// writeBatch appends the events of batch in one transaction and answers
// every call. A call refused on its own (missing session, lost lease)
// appends nothing and does not fail the others; a failed transaction
// fails them all. A deadlock or serialization failure is tried again once.
func (s *Store) writeBatch(batch []*appendReq) {
	ctx := context.Background() // the calls' outcome must not depend on who asked first
	var accepted []*appendReq
	var firsts []int64
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			var err error
			accepted, firsts, err = appendBatch(ctx, tx, batch, s.channel(eventsChannel))
			return err
		})
		if !retryable(err) {
			break
		}
	}
	for i, r := range accepted {
		if err == nil {
			for j := range r.evs {
				r.evs[j].Seq = firsts[i] + int64(j)
			}
		}
		r.err = err
		if err != nil {
			r.err = fmt.Errorf("append events of session %s: %w", r.evs[0].SessionID, err)
		}
	}
	for _, r := range batch {
		close(r.done)
	}
}

// retryable reports whether err is Postgres undoing a transaction that
// may succeed if tried again.
func retryable(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "40P01" || pe.Code == "40001")
}

// appendBatch numbers and inserts the calls of batch that may append, in
// tx, and returns them with the first seq of each. It sets the err of the
// others. The sessions' rows are locked in id order, then their leases',
// so concurrent batches cannot deadlock.
func appendBatch(ctx context.Context, tx pgx.Tx, batch []*appendReq, channel string) ([]*appendReq, []int64, error) {
	ids := make([]string, 0, len(batch))
	for _, r := range batch {
		r.err = nil
		ids = append(ids, r.evs[0].SessionID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	last, err := lockSeqs(ctx, tx, ids)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := lockLeases(ctx, tx, ids)
	if err != nil {
		return nil, nil, err
	}
	var rows eventRows
	touched := make(map[string]int64, len(ids)) // the last seq of each session appended to
	var accepted []*appendReq
	var firsts []int64
	for _, r := range batch {
		id := r.evs[0].SessionID
		seq, ok := last[id]
		switch {
		case !ok:
			r.err = session.SessionNotFound(id)
			continue
		case tokens[id] != r.token || r.token == 0:
			r.err = session.ErrFenced
			continue
		}
		accepted, firsts = append(accepted, r), append(firsts, seq+1)
		rows.add(r.evs, seq+1)
		last[id] = seq + int64(len(r.evs))
		touched[id] = last[id]
	}
	if len(accepted) == 0 {
		return nil, nil, nil
	}
	return accepted, firsts, rows.write(ctx, tx, touched, channel)
}

// lockSeqs locks the rows of sessions ids and returns their last seqs; a
// missing session has none.
func lockSeqs(ctx context.Context, tx pgx.Tx, ids []string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, `SELECT id, last_seq FROM sessions WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, ids)
	if err != nil {
		return nil, err
	}
	last := make(map[string]int64, len(ids))
	var id string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&id, &seq}, func() error { last[id] = seq; return nil })
	return last, err
}

// lockLeases locks the live leases of sessions ids and returns their
// tokens.
func lockLeases(ctx context.Context, tx pgx.Tx, ids []string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, `SELECT session_id, token FROM leases
		WHERE session_id = ANY($1) AND expires_at > kerneld_now_us() ORDER BY session_id FOR UPDATE`, ids)
	if err != nil {
		return nil, err
	}
	tokens := make(map[string]int64, len(ids))
	var id string
	var token int64
	_, err = pgx.ForEachRow(rows, []any{&id, &token}, func() error { tokens[id] = token; return nil })
	return tokens, err
}

// eventRows are the columns of the events a batch inserts, as arrays for
// one INSERT … SELECT FROM unnest: one statement whatever the batch's
// size, its parameters bound in binary.
type eventRows struct {
	sessions, runs, types []string
	seqs, times           []int64
	data, meta            [][]byte
}

func (e *eventRows) add(evs []session.Event, first int64) {
	for i, ev := range evs {
		e.sessions = append(e.sessions, ev.SessionID)
		e.seqs = append(e.seqs, first+int64(i))
		e.runs = append(e.runs, ev.RunID)
		e.types = append(e.types, string(ev.Type))
		e.times = append(e.times, micros(ev.Time))
		e.data = append(e.data, ev.Data)
		e.meta = append(e.meta, ev.Meta)
	}
}

// write inserts the rows, moves the sessions' last seqs and tells the
// tailers (delivered at commit, so never before the rows are visible).
func (e *eventRows) write(ctx context.Context, tx pgx.Tx, last map[string]int64, channel string) error {
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO events (session_id, seq, run_id, type, time, data, meta)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $7::bytea[])`,
		e.sessions, e.seqs, e.runs, e.types, e.times, e.data, e.meta)
	ids := make([]string, 0, len(last))
	seqs := make([]int64, 0, len(last))
	notes := make([]string, 0, len(last))
	for id, seq := range last {
		ids, seqs = append(ids, id), append(seqs, seq)
		notes = append(notes, strconv.FormatInt(seq, 10)+" "+id)
	}
	batch.Queue(`UPDATE sessions SET last_seq = v.last FROM unnest($1::text[], $2::bigint[]) AS v(id, last)
		WHERE sessions.id = v.id`, ids, seqs)
	batch.Queue(`SELECT pg_notify($1, n) FROM unnest($2::text[]) AS n`, channel, notes)
	return tx.SendBatch(ctx, batch).Close()
}

// ReadEvents returns a session's events with seq > after in seq order, at
// most limit of them when limit > 0: a range read of the primary key.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, run_id, type, time, data, meta FROM events
		WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, max(after, 0), limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, unavailable(ctx, err))
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (session.Event, error) {
		ev := session.Event{SessionID: sessionID}
		var us int64
		err := row.Scan(&ev.Seq, &ev.RunID, (*string)(&ev.Type), &us, &ev.Data, &ev.Meta)
		ev.Time = fromMicros(us)
		return ev, err
	})
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, unavailable(ctx, err))
	}
	if len(evs) == 0 {
		return nil, s.missing(ctx, sessionID, nil)
	}
	return evs, nil
}
