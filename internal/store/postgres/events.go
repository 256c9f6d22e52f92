package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
// batch and writes them with one statement (appendSQL), one round trip
// and one commit per batch, not per event.
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

// writeBatch appends the events of batch in one statement and answers
// every call. A call refused on its own (missing session, lost lease)
// appends nothing and does not fail the others; a failed statement fails
// them all. A deadlock or serialization failure is tried again once.
func (s *Store) writeBatch(batch []*appendReq) {
	ctx := context.Background() // the calls' outcome must not depend on who asked first
	args := newAppendArgs(batch, s.channel(eventsChannel))
	var firsts []int64
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		firsts, err = args.run(ctx, s.pool)
		if !retryable(err) {
			break
		}
	}
	err = s.failed(ctx, err)
	for i, r := range batch {
		switch {
		case err != nil:
			r.err = fmt.Errorf("append events of session %s: %w", r.evs[0].SessionID, err)
		case firsts[i] == seqNotFound:
			r.err = session.SessionNotFound(r.evs[0].SessionID)
		case firsts[i] == seqFenced:
			r.err = session.ErrFenced
		default:
			for j := range r.evs {
				r.evs[j].Seq = firsts[i] + int64(j)
			}
		}
		close(r.done)
	}
}

// retryable reports whether err is Postgres undoing a transaction that
// may succeed if tried again.
func retryable(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "40P01" || pe.Code == "40001")
}

// What appendSQL answers, instead of a first seq, for a call it refused.
const (
	seqNotFound = -1 // the session does not exist
	seqFenced   = -2 // its lease is not held with the call's token
)

// appendSQL appends a batch in one statement, so one round trip, in the
// implicit transaction of that statement: it locks the sessions' rows in
// id order (s), then, once all of those are held, their live leases in
// the same order (l), so that concurrent batches cannot deadlock; takes
// the calls whose session exists and whose token holds the lease (a),
// numbering each from its session's last seq and the calls before it;
// inserts their events; moves the sessions' last seqs and tells the
// tailers (NOTIFY is delivered at commit, so never before the rows are
// visible). It answers each call, in order, with its first seq or why it
// was refused.
//
// Rows locked FOR UPDATE are read as last committed, so last_seq is the
// latest even when the statement waited for another batch's lock.
const appendSQL = `WITH s AS MATERIALIZED (
	SELECT id, last_seq FROM sessions WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE
), l AS MATERIALIZED (
	SELECT session_id, token FROM leases
	WHERE session_id = ANY(ARRAY(SELECT id FROM s)) AND expires_at > kerneld_now_us()
	ORDER BY session_id FOR UPDATE
), r AS MATERIALIZED (
	SELECT q.i, q.sid, q.n, s.last_seq, s.id IS NOT NULL AS found,
		s.id IS NOT NULL AND q.token <> 0 AND l.token IS NOT NULL AND l.token = q.token AS held
	FROM unnest($2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS q(sid, token, n, i)
	LEFT JOIN s ON s.id = q.sid
	LEFT JOIN l ON l.session_id = q.sid
), a AS MATERIALIZED (
	SELECT i, sid, n, (last_seq + sum(n) OVER (PARTITION BY sid ORDER BY i) - n + 1)::bigint AS first
	FROM r WHERE held
), ins AS (
	INSERT INTO events (session_id, seq, run_id, type, time, data, meta)
	SELECT a.sid, a.first + e.off, e.run, e.type, e.time, e.data, e.meta
	FROM unnest($5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::bigint[], $10::bytea[], $11::bytea[])
		AS e(req, off, run, type, time, data, meta)
	JOIN a ON a.i = e.req
), upd AS (
	UPDATE sessions SET last_seq = m.last
	FROM (SELECT sid, max(first + n - 1) AS last FROM a GROUP BY sid) AS m
	WHERE sessions.id = m.sid
	RETURNING pg_notify($12, m.last || ' ' || m.sid)
)
SELECT CASE WHEN NOT r.found THEN -1 WHEN NOT r.held THEN -2 ELSE a.first END,
	(SELECT count(*) FROM upd)
FROM r LEFT JOIN a ON a.i = r.i
ORDER BY r.i`

// appendArgs are appendSQL's parameters for one batch: the calls, and
// their events as arrays bound in binary, one statement whatever the
// batch's size.
type appendArgs struct {
	ids            []string // the batch's sessions, sorted, once each
	sids           []string // per call
	tokens, counts []int64  // per call
	reqs, offs     []int64  // per event: its call (from 1) and place in it
	runs, types    []string
	times          []int64
	data, meta     [][]byte
	channel        string
}

func newAppendArgs(batch []*appendReq, channel string) *appendArgs {
	a := &appendArgs{channel: channel}
	for i, r := range batch {
		id := r.evs[0].SessionID
		a.ids = append(a.ids, id)
		a.sids, a.tokens, a.counts = append(a.sids, id), append(a.tokens, r.token), append(a.counts, int64(len(r.evs)))
		for j, ev := range r.evs {
			a.reqs, a.offs = append(a.reqs, int64(i+1)), append(a.offs, int64(j))
			a.runs, a.types = append(a.runs, ev.RunID), append(a.types, string(ev.Type))
			a.times = append(a.times, micros(ev.Time))
			a.data, a.meta = append(a.data, ev.Data), append(a.meta, ev.Meta)
		}
	}
	slices.Sort(a.ids)
	a.ids = slices.Compact(a.ids)
	return a
}

// run executes the statement and returns each call's first seq, or
// seqNotFound or seqFenced.
func (a *appendArgs) run(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	rows, err := pool.Query(ctx, appendSQL, a.ids, a.sids, a.tokens, a.counts,
		a.reqs, a.offs, a.runs, a.types, a.times, a.data, a.meta, a.channel)
	if err != nil {
		return nil, err
	}
	firsts := make([]int64, 0, len(a.sids))
	var first, notified int64
	_, err = pgx.ForEachRow(rows, []any{&first, &notified}, func() error {
		firsts = append(firsts, first)
		return nil
	})
	if err == nil && len(firsts) != len(a.sids) {
		err = fmt.Errorf("append events: %d answers for %d calls", len(firsts), len(a.sids))
	}
	return firsts, err
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

// eventRows are the columns of events written inside a transaction (a
// run's start: StartRun), as arrays for one INSERT … SELECT FROM unnest,
// its parameters bound in binary. Appends write theirs with appendSQL.
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
