package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// This file is the event half of a batch: numbering each append's events
// from its session's last seq, and writing the rows and the new last seqs
// with as few statements as it can.

// maxCachedSeqs bounds batchTx.lastSeq. Past it the cache is emptied and
// refills from sessions.last_seq as sessions append again; a bound this
// coarse is enough, since a reload costs one primary-key lookup.
const maxCachedSeqs = 100_000

// maxRowsPerStmt is the most rows one multi-row statement carries. Each
// statement costs a fixed overhead in database/sql and the driver, so a
// batch's event rows and last seqs go in as few statements as they can.
const maxRowsPerStmt = 64

const (
	insertEventsSQL = `INSERT INTO events (session_id, seq, run_id, type, time, data, meta) VALUES `
	eventRowSQL     = `(?, ?, ?, ?, ?, ?, ?)`
	// saveSeqsSQL sets the last seqs of many sessions at once, from a
	// VALUES list of (id, last seq): SQLite scans the list and looks each
	// session up by its primary key.
	saveSeqsSQL   = `UPDATE sessions SET last_seq = v.column2 FROM (VALUES `
	saveSeqsWhere = `) AS v WHERE sessions.id = v.column1`
)

// rowStmts is one statement in several sizes: stmts[i] writes 1<<i rows,
// so that rows of any number go in few statements, and few statements are
// prepared. A size is prepared on its first use.
type rowStmts struct {
	head, row, tail string
	stmts           []*sql.Stmt
}

// newRowStmts returns head, then row repeated 1, 2, 4… maxRowsPerStmt
// times, then tail.
func newRowStmts(head, row, tail string) rowStmts {
	return rowStmts{head: head, row: row, tail: tail, stmts: make([]*sql.Stmt, bits.Len(maxRowsPerStmt))}
}

// rowStmt returns the size of rs that writes 1<<i rows, preparing it on
// its first use.
func (tx *batchTx) rowStmt(rs *rowStmts, i int) (*sql.Stmt, error) {
	if rs.stmts[i] == nil {
		stmt, err := tx.prepare(rs.head + strings.Repeat(rs.row+", ", 1<<i-1) + rs.row + rs.tail)
		if err != nil {
			return nil, err
		}
		rs.stmts[i] = stmt
	}
	return rs.stmts[i], nil
}

// execRows writes n rows with rs, the largest size that fits first;
// appendRow appends the values of row i to args.
func (tx *batchTx) execRows(rs *rowStmts, n int, appendRow func(args []any, i int) []any) error {
	for done := 0; done < n; {
		i := min(len(rs.stmts), bits.Len(uint(n-done))) - 1 // the largest 1<<i <= n-done
		stmt, err := tx.rowStmt(rs, i)
		if err != nil {
			return err
		}
		args := tx.args[:0]
		for row := done; row < done+1<<i; row++ {
			args = appendRow(args, row)
		}
		_, err = stmt.ExecContext(tx.ctx, args...)
		clear(args) // keep no events alive
		tx.args = args[:0]
		if err != nil {
			return err
		}
		done += 1 << i
	}
	return nil
}

// seqState is a session's last seq as the batch knows it; dirty until it
// is saved to sessions.last_seq.
type seqState struct {
	last  int64
	dirty bool
}

// seqRow is a last seq to save.
type seqRow struct {
	id   string
	last int64
}

// eventRow is one event to insert with the seq the batch gave it.
type eventRow struct {
	ev  *session.Event
	seq int64
}

// number gives r the seqs that follow its session's last one, and queues
// its rows. A missing session or a lease not held with r's token is r's
// own error, not the batch's; a missing session is reported first.
func (tx *batchTx) number(r *writeReq) error {
	id := r.evs[0].SessionID
	last, ok, err := tx.lastSeqOf(id)
	if err != nil {
		return fmt.Errorf("append events: load last seq of session %s: %w", id, err)
	}
	if !ok {
		r.err = session.SessionNotFound(id)
		return nil
	}
	if err := tx.leases.fenced(id, r.token); err != nil {
		r.err = err
		return nil
	}
	r.first = last + 1
	tx.seqs[id] = seqState{last: last + int64(len(r.evs)), dirty: true}
	for i := range r.evs {
		tx.rows = append(tx.rows, eventRow{ev: &r.evs[i], seq: r.first + int64(i)})
	}
	return nil
}

// lastSeqOf returns a session's last seq from this batch, the cache or
// the database, in that order; ok is false if the session is missing.
func (tx *batchTx) lastSeqOf(id string) (last int64, ok bool, err error) {
	if st, ok := tx.seqs[id]; ok {
		return st.last, true, nil
	}
	if last, ok := tx.lastSeq[id]; ok {
		return last, true, nil
	}
	err = tx.queryRow(stmtLoadSeq, id).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return last, err == nil, err
}

// created records that the batch created session id, whose last seq is
// therefore 0: its first append needs no lookup.
func (tx *batchTx) created(id string) { tx.seqs[id] = seqState{} }

// deleted forgets session id, which the batch deleted: a session created
// again under this id must start from seq 1.
func (tx *batchTx) deleted(id string) {
	delete(tx.seqs, id)
	delete(tx.lastSeq, id) // a cache entry may go early, never stay late
}

// flushEvents inserts the events numbered so far and saves their
// sessions' last seqs. The batch calls it before committing and before a
// statement that must see them: deleting a session whose rows are queued.
func (tx *batchTx) flushEvents() error {
	rows := tx.rows
	err := tx.execRows(&tx.insertEvents, len(rows), func(args []any, i int) []any {
		ev := rows[i].ev
		return append(args, ev.SessionID, rows[i].seq, ev.RunID, string(ev.Type), micros(ev.Time),
			[]byte(ev.Data), []byte(ev.Meta))
	})
	clear(rows) // keep no events alive
	tx.rows = rows[:0]
	if err != nil {
		return fmt.Errorf("append events: insert: %w", err)
	}
	return tx.saveLastSeqs()
}

// saveLastSeqs writes the batch's new last seqs to their sessions.
func (tx *batchTx) saveLastSeqs() error {
	dirty := tx.dirty[:0]
	for id, st := range tx.seqs {
		if st.dirty {
			dirty = append(dirty, seqRow{id: id, last: st.last})
			tx.seqs[id] = seqState{last: st.last}
		}
	}
	tx.dirty = dirty
	err := tx.execRows(&tx.saveSeqs, len(dirty), func(args []any, i int) []any {
		return append(args, dirty[i].id, dirty[i].last)
	})
	if err != nil {
		return fmt.Errorf("append events: update last seqs: %w", err)
	}
	return nil
}

// cacheSeqs records the committed batch's last seqs.
func (tx *batchTx) cacheSeqs() {
	if len(tx.lastSeq)+len(tx.seqs) > maxCachedSeqs {
		clear(tx.lastSeq)
	}
	for id, st := range tx.seqs {
		tx.lastSeq[id] = st.last
	}
}
