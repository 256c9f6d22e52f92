package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// maxCachedSeqs bounds batchTx.lastSeq. Past it the cache is emptied and
// refills from sessions.last_seq as sessions append again; a bound this
// coarse is enough, since a reload costs one primary-key lookup.
const maxCachedSeqs = 100_000

// maxRowsPerInsert is the most events one INSERT statement carries. Each
// statement costs a fixed overhead in database/sql and the driver, so a
// batch goes in as few multi-row INSERTs as it can.
const maxRowsPerInsert = 64

// eventColumns is how many values an event row binds.
const eventColumns = 7

// stmtID names a statement the writer runs; stmtSQL holds their text.
type stmtID int

const (
	stmtLoadSeq stmtID = iota
	stmtSaveSeq
	stmtSessionExists
	stmtCreateSession
	stmtUpdateSession
	stmtDeleteSession
	stmtCreateRun
	stmtUpdateRun
	stmtLastPosition
	stmtInsertMessage
	stmtCountMemory
	stmtPutMemory
	stmtDeleteMemory
	numStmts
)

var stmtSQL = [numStmts]string{
	stmtLoadSeq:       `SELECT last_seq FROM sessions WHERE id = ?`,
	stmtSaveSeq:       `UPDATE sessions SET last_seq = ? WHERE id = ?`,
	stmtSessionExists: `SELECT 1 FROM sessions WHERE id = ?`,
	stmtCreateSession: createSessionSQL,
	stmtUpdateSession: updateSessionSQL,
	stmtDeleteSession: `DELETE FROM sessions WHERE id = ?`,
	stmtCreateRun:     createRunSQL,
	stmtUpdateRun:     updateRunSQL,
	stmtLastPosition:  lastPositionSQL,
	stmtInsertMessage: insertMessageSQL,
	stmtCountMemory:   countMemorySQL,
	stmtPutMemory:     putMemorySQL,
	stmtDeleteMemory:  `DELETE FROM memory WHERE session_id = ? AND key = ?`,
}

// batchTx is the writer's transaction for one batch, with what the batch
// has learnt so far. The writer keeps the writer pool's one connection for
// as long as it runs, so every statement is prepared on it once, at Open,
// and a batch runs them as they are: parsing the SQL again was 15% of a
// CreateSession, and binding prepared statements to a *sql.Tx per batch
// cost more than BEGIN and COMMIT on the connection.
type batchTx struct {
	ctx   context.Context // not a caller's: one caller giving up must not fail the rest
	conn  *sql.Conn
	stmts [numStmts]*sql.Stmt
	// inserts[i] inserts 1<<i event rows; a batch is cut into powers of
	// two, so any size needs few statements and few are prepared.
	inserts                []*sql.Stmt
	begin, commit, abandon *sql.Stmt

	seqs map[string]seqState // sessions whose last seq this batch knows
	rows []eventRow          // events numbered but not inserted yet
	args []any

	// lastSeq holds sessions.last_seq of recently written sessions across
	// batches. Only the writer writes, so it stays true to the database.
	lastSeq map[string]int64
}

// seqState is a session's last seq as the batch knows it; dirty until it
// is saved to sessions.last_seq.
type seqState struct {
	last  int64
	dirty bool
}

// eventRow is one event to insert with the seq the batch gave it.
type eventRow struct {
	ev  *session.Event
	seq int64
}

func (tx *batchTx) init() {
	tx.ctx = context.Background()
	tx.seqs = make(map[string]seqState)
	tx.lastSeq = make(map[string]int64)
}

// open takes db's connection for the writer and prepares the writer's
// statements on it.
func (tx *batchTx) open(ctx context.Context, db *sql.DB) error {
	var err error
	if tx.conn, err = db.Conn(ctx); err != nil {
		return err
	}
	prepare := func(query string) *sql.Stmt {
		var stmt *sql.Stmt
		if err == nil {
			if stmt, err = tx.conn.PrepareContext(ctx, query); err != nil {
				err = fmt.Errorf("prepare %.40q: %w", query, err)
			}
		}
		return stmt
	}
	row := "(" + strings.Repeat("?, ", eventColumns-1) + "?)"
	for n := 1; n <= maxRowsPerInsert; n *= 2 {
		tx.inserts = append(tx.inserts, prepare(`INSERT INTO events
			(session_id, seq, run_id, type, time, data, meta) VALUES `+strings.Repeat(row+", ", n-1)+row))
	}
	for id, query := range stmtSQL {
		tx.stmts[id] = prepare(query)
	}
	tx.begin, tx.commit, tx.abandon = prepare(`BEGIN IMMEDIATE`), prepare(`COMMIT`), prepare(`ROLLBACK`)
	if err != nil {
		tx.close()
	}
	return err
}

// close closes the statements prepared on the connection and gives it
// back to the writer pool. database/sql does not track statements
// prepared on a *sql.Conn: one left open would keep SQLite from closing
// the database file, and from checkpointing and removing the WAL.
func (tx *batchTx) close() {
	for _, stmt := range tx.all() {
		if stmt != nil {
			_ = stmt.Close() // a finalize error leaves nothing to do
		}
	}
	_ = tx.conn.Close() // Close reports the pool's errors
}

// all returns every statement open prepares.
func (tx *batchTx) all() []*sql.Stmt {
	all := append(tx.stmts[:], tx.inserts...)
	return append(all, tx.begin, tx.commit, tx.abandon)
}

// writeBatch writes reqs in one transaction. A call's own failure is its
// own (see writeOp); any other failure fails the transaction and changes
// nothing, the seq cache included.
func (s *Store) writeBatch(reqs []*writeReq) error {
	tx := &s.tx
	if _, err := tx.begin.ExecContext(tx.ctx); err != nil {
		return fmt.Errorf("begin writes: %w", err)
	}
	committed := false
	defer func() { tx.end(committed) }()
	for _, r := range reqs {
		if err := tx.apply(r); err != nil {
			return err
		}
	}
	if err := tx.flushEvents(); err != nil {
		return err
	}
	if _, err := tx.commit.ExecContext(tx.ctx); err != nil {
		return fmt.Errorf("commit writes: %w", err)
	}
	committed = true
	tx.cacheSeqs()
	s.count(reqs)
	return nil
}

// end rolls the transaction back unless it committed, and forgets what
// the batch learnt.
func (tx *batchTx) end(committed bool) {
	if !committed {
		// SQLite may have rolled back already, after an I/O error say;
		// then ROLLBACK fails, and the failure that got here is the one
		// to report.
		_, _ = tx.abandon.ExecContext(tx.ctx)
	}
	clear(tx.seqs)
	clear(tx.rows) // keep no events alive
	tx.rows = tx.rows[:0]
}

// apply runs r's statements, or for an append numbers its events; their
// rows go in at the end of the batch, or before a statement that needs
// them (see flushEvents).
func (tx *batchTx) apply(r *writeReq) error {
	r.err, r.first = nil, 0 // a call written again alone starts afresh
	if r.op == nil {
		return tx.number(r)
	}
	own, err := r.op(tx)
	r.err = own
	return err
}

// exec runs statement id and reports whether it changed any row.
func (tx *batchTx) exec(id stmtID, args ...any) (changed bool, err error) {
	res, err := tx.stmts[id].ExecContext(tx.ctx, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// queryRow runs statement id, which returns at most one row.
func (tx *batchTx) queryRow(id stmtID, args ...any) *sql.Row {
	return tx.stmts[id].QueryRowContext(tx.ctx, args...)
}

// requireSession returns, as the call's own failure, ErrNotFound if
// session id is missing as the batch has left it.
func (tx *batchTx) requireSession(id string) (own, err error) {
	var one int
	err = tx.queryRow(stmtSessionExists, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return session.SessionNotFound(id), nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up session %s: %w", id, err)
	}
	return nil, nil
}

// number gives r the seqs that follow its session's last one, and queues
// its rows. A missing session is r's own error, not the batch's.
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
	defer func() { clear(rows); tx.rows = tx.rows[:0] }() // keep no events alive
	for len(rows) > 0 {
		i := min(len(tx.inserts), bitLen(len(rows))) - 1 // the largest 1<<i <= len(rows)
		n := 1 << i
		if err := tx.insertRows(tx.inserts[i], rows[:n]); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return tx.saveLastSeqs()
}

// insertRows runs stmt, which inserts len(rows) rows, on rows.
func (tx *batchTx) insertRows(stmt *sql.Stmt, rows []eventRow) error {
	args := tx.args[:0]
	for _, r := range rows {
		ev := r.ev
		args = append(args, ev.SessionID, r.seq, ev.RunID, string(ev.Type), micros(ev.Time),
			[]byte(ev.Data), []byte(ev.Meta))
	}
	defer func() { clear(args); tx.args = args[:0] }()
	if _, err := stmt.ExecContext(tx.ctx, args...); err != nil {
		return fmt.Errorf("append events: insert: %w", err)
	}
	return nil
}

// bitLen returns the number of bits n needs: 1<<(bitLen(n)-1) <= n.
func bitLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// saveLastSeqs writes the batch's new last seqs to their sessions.
func (tx *batchTx) saveLastSeqs() error {
	for id, st := range tx.seqs {
		if !st.dirty {
			continue
		}
		if _, err := tx.exec(stmtSaveSeq, st.last, id); err != nil {
			return fmt.Errorf("append events: update last seq of session %s: %w", id, err)
		}
		tx.seqs[id] = seqState{last: st.last}
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

// count adds a committed batch to the store's Stats.
func (s *Store) count(reqs []*writeReq) {
	var appends, events, writes int64
	for _, r := range reqs {
		switch {
		case r.err != nil:
		case r.op != nil:
			writes++
		default:
			appends++
			events += int64(len(r.evs))
		}
	}
	if hasAppend(reqs) {
		s.commits.Add(1)
	}
	s.appends.Add(appends)
	s.events.Add(events)
	s.writes.Add(writes)
	s.batches.Add(1)
	s.ckpt.appended(events + writes)
}

// hasAppend reports whether reqs hold an AppendEvents call.
func hasAppend(reqs []*writeReq) bool {
	for _, r := range reqs {
		if r.op == nil {
			return true
		}
	}
	return false
}
