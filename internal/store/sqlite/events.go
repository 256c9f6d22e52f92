package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// AppendEvents appends evs, all of one session, numbering them from the
// session's LastSeq + 1, while the session's lease is held with token, and
// writes each seq into evs once the batch is committed. The lease is
// checked in the transaction that appends them. Either the whole call is appended or none of it: a call that
// names more than one session is ErrInvalid, an unknown session
// ErrNotFound, and after Close it is ErrUnavailable.
//
// Calls from many goroutines are committed together, with the store's
// other writes (see writer), so the call returns after the transaction
// holding it commits, within about Options.BatchDelay plus one commit.
//
// Cancellation: if ctx ends before the writer has taken the call into a
// transaction, AppendEvents returns ctx.Err() and appends nothing. Once
// taken, the transaction decides, and AppendEvents waits for it and
// reports its outcome even if ctx has ended meanwhile: it never reports a
// failure for events that were appended.
func (s *Store) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := oneSession(evs); err != nil {
		return err
	}
	return s.submit(ctx, &writeReq{evs: evs, token: token, done: make(chan struct{})})
}

// oneSession rejects a batch that mixes sessions.
func oneSession(evs []session.Event) error {
	_, err := session.EventsOfOneSession(evs)
	return err
}

// ReadEvents returns a session's events with seq > after in seq order, at
// most limit of them when limit > 0.
//
// It reads the session's last seq and its events in one read transaction,
// so it sizes the result exactly: replaying a long log was a fifth slower
// when the slice grew by appending.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error) {
	r, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	defer s.release(r)
	if err := r.exec(brief(ctx), `BEGIN`); err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	defer r.end()
	var last int64
	err = r.queryRow(brief(ctx), `SELECT last_seq FROM sessions WHERE id = ?`, sessionID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, session.SessionNotFound(sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	after = max(after, 0)
	n := max(last-after, 0) // seqs are 1..last
	if limit > 0 {
		n = min(n, int64(limit))
	}
	if n == 0 {
		return nil, nil
	}
	if n <= maxBriefRows {
		ctx = brief(ctx) // the tail of the log, which the kernel reads around every run
	}
	// Seqs run 1..last with no gap, so the n events after after are those
	// up to after+n: a bound rather than a LIMIT, which would have the
	// statement prepared again (see limitClause).
	rows, err := r.query(ctx, `SELECT seq, run_id, type, time, data, meta FROM events
		WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, sessionID, after, after+n)
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	evs, err := scanEvents(rows, sessionID, int(n))
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	return evs, nil
}

// scanEvents reads up to n rows of (seq, run_id, type, time, data, meta)
// of session sessionID, and closes rows. Data and Meta of all the events
// share one buffer per chunk of events rather than an allocation each.
func scanEvents(rows *sql.Rows, sessionID string, n int) ([]session.Event, error) {
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	evs := make([]session.Event, 0, n)
	a := arena{next: min(arenaChunk, n*eventBytes)}
	for rows.Next() {
		ev := session.Event{SessionID: sessionID}
		var us int64
		var data, meta sql.RawBytes
		if err := rows.Scan(&ev.Seq, &ev.RunID, (*string)(&ev.Type), &us, &data, &meta); err != nil {
			return nil, err
		}
		ev.Time = fromMicros(us)
		ev.Data = a.keep(data)
		ev.Meta = a.keep(meta)
		evs = append(evs, ev)
	}
	return evs, rows.Err()
}

// arenaChunk is the size of the buffers scanEvents copies bytes into, and
// eventBytes about what a token event's data and meta take: a read of a
// few events starts with a chunk its size, since the kernel reads a
// session's last event around every run.
const (
	arenaChunk = 64 << 10
	eventBytes = 256
)

// arena is where scanEvents copies the bytes of events.
type arena struct {
	buf  []byte
	next int // the size of the next chunk
}

// keep copies b to the end of the arena and returns the copy, capped so
// that appending to it cannot overwrite a neighbour. A full chunk is
// replaced, not grown: copies already handed out stay where they are.
func (a *arena) keep(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) > cap(a.buf)-len(a.buf) {
		if len(b) > arenaChunk/4 {
			return append(make([]byte, 0, len(b)), b...)
		}
		a.buf = make([]byte, 0, max(a.next, len(b)))
		a.next = arenaChunk
	}
	n := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[n:len(a.buf):len(a.buf)]
}
