package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// stmtID names a statement the writer runs; stmtSQL holds their text.
type stmtID int

const (
	stmtLoadSeq stmtID = iota
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
	stmtClearMetadata
	stmtInsertMetadata
	stmtCountQueued
	stmtFindRunByKey
	stmtRunExists
	stmtSessionVersion
	numStmts
)

var stmtSQL = [numStmts]string{
	stmtLoadSeq:        `SELECT last_seq FROM sessions WHERE id = ?`,
	stmtSessionExists:  `SELECT 1 FROM sessions WHERE id = ?`,
	stmtCreateSession:  createSessionSQL,
	stmtUpdateSession:  updateSessionSQL,
	stmtDeleteSession:  `DELETE FROM sessions WHERE id = ?`,
	stmtCreateRun:      createRunSQL,
	stmtUpdateRun:      updateRunSQL,
	stmtLastPosition:   lastPositionSQL,
	stmtInsertMessage:  insertMessageSQL,
	stmtCountMemory:    countMemorySQL,
	stmtPutMemory:      putMemorySQL,
	stmtDeleteMemory:   `DELETE FROM memory WHERE session_id = ? AND key = ?`,
	stmtClearMetadata:  clearMetadataSQL,
	stmtInsertMetadata: insertMetadataSQL,
	stmtCountQueued:    `SELECT count(*) FROM runs WHERE session_id = ? AND state = 'queued'`,
	stmtFindRunByKey:   findRunByKeySQL,
	stmtRunExists:      `SELECT 1 FROM runs WHERE session_id = ? AND id = ?`,
	stmtSessionVersion: `SELECT version FROM sessions WHERE id = ?`,
}

// batchTx is the writer's transaction for one batch, with what the batch
// has learnt so far. The writer keeps the writer pool's one connection for
// as long as it runs, so every statement is prepared on it once, on its
// first use, and a batch runs them as they are: parsing the SQL again was
// 15% of a CreateSession, and binding prepared statements to a *sql.Tx per
// batch cost more than BEGIN and COMMIT on the connection. Preparing them
// all at Open held 300 KB of SQLite's memory in an idle store.
type batchTx struct {
	ctx   context.Context // not a caller's: one caller giving up must not fail the rest
	conn  *sql.Conn
	stmts [numStmts]*sql.Stmt // nil until first used (see stmt)
	// insertEvents and saveSeqs write many rows a statement.
	insertEvents, saveSeqs rowStmts
	begin, commit, abandon *sql.Stmt

	seqs  map[string]seqState // sessions whose last seq this batch knows
	rows  []eventRow          // events numbered but not inserted yet
	dirty []seqRow            // last seqs to save, gathered by saveLastSeqs
	args  []any

	// lastSeq holds sessions.last_seq of recently written sessions across
	// batches. Only the writer writes, so it stays true to the database.
	lastSeq map[string]int64

	leases *leaseTable // fences appends
}

func (tx *batchTx) init() {
	tx.ctx = context.Background()
	tx.seqs = make(map[string]seqState)
	tx.lastSeq = make(map[string]int64)
	tx.insertEvents = newRowStmts(insertEventsSQL, eventRowSQL, "")
	tx.saveSeqs = newRowStmts(saveSeqsSQL, "(?, ?)", saveSeqsWhere)
}

// open takes db's connection for the writer and prepares the statements
// that begin and end its transactions on it; the others wait for their
// first use.
func (tx *batchTx) open(ctx context.Context, db *sql.DB) error {
	var err error
	if tx.conn, err = db.Conn(ctx); err != nil {
		return err
	}
	prepare := func(query string) *sql.Stmt {
		var stmt *sql.Stmt
		if err == nil {
			stmt, err = tx.prepare(query)
		}
		return stmt
	}
	tx.begin, tx.commit, tx.abandon = prepare(`BEGIN IMMEDIATE`), prepare(`COMMIT`), prepare(`ROLLBACK`)
	if err != nil {
		tx.close()
	}
	return err
}

// prepare prepares query on the writer's connection.
func (tx *batchTx) prepare(query string) (*sql.Stmt, error) {
	stmt, err := tx.conn.PrepareContext(tx.ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %.40q: %w", query, err)
	}
	return stmt, nil
}

// stmt returns statement id, preparing it on its first use.
func (tx *batchTx) stmt(id stmtID) (*sql.Stmt, error) {
	if tx.stmts[id] == nil {
		stmt, err := tx.prepare(stmtSQL[id])
		if err != nil {
			return nil, err
		}
		tx.stmts[id] = stmt
	}
	return tx.stmts[id], nil
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

// all returns every statement the writer may have prepared, nil for those
// it has not.
func (tx *batchTx) all() []*sql.Stmt {
	all := append(tx.stmts[:], tx.insertEvents.stmts...)
	all = append(all, tx.saveSeqs.stmts...)
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
	clear(tx.dirty)
	tx.dirty = tx.dirty[:0]
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
	stmt, err := tx.stmt(id)
	if err != nil {
		return false, err
	}
	res, err := stmt.ExecContext(tx.ctx, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// queryRow runs statement id, which returns at most one row.
func (tx *batchTx) queryRow(id stmtID, args ...any) scanner {
	stmt, err := tx.stmt(id)
	if err != nil {
		return errRow{err}
	}
	return stmt.QueryRowContext(tx.ctx, args...)
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
