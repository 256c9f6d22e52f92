package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// maxRowsPerInsert is the most events one INSERT statement carries. Each
// statement costs a fixed overhead in database/sql and the driver, so a
// batch goes in as few multi-row INSERTs as it can.
const maxRowsPerInsert = 64

// eventColumns is how many values an event row binds.
const eventColumns = 7

// writeStmts are the hot statements of the writer connection, prepared
// once at Open so that they and transactions on that one connection reuse
// them: parsing the SQL again was 15% of a CreateSession.
type writeStmts struct {
	// inserts[i] inserts 1<<i rows; a batch is cut into powers of two,
	// so any size needs few statements and few are prepared.
	inserts       []*sql.Stmt
	saveSeq       *sql.Stmt
	createSession *sql.Stmt
}

// eventRow is one event to insert with the seq the batch gave it.
type eventRow struct {
	ev  *session.Event
	seq int64
}

func (w *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	for n := 1; n <= maxRowsPerInsert; n *= 2 {
		row := "(" + strings.Repeat("?, ", eventColumns-1) + "?)"
		stmt, err := db.PrepareContext(ctx, `INSERT INTO events
			(session_id, seq, run_id, type, time, data, meta) VALUES `+
			strings.Repeat(row+", ", n-1)+row)
		if err != nil {
			return fmt.Errorf("prepare event insert: %w", err)
		}
		w.inserts = append(w.inserts, stmt)
	}
	var err error
	if w.saveSeq, err = db.PrepareContext(ctx, `UPDATE sessions SET last_seq = ? WHERE id = ?`); err != nil {
		return fmt.Errorf("prepare last seq update: %w", err)
	}
	if w.createSession, err = db.PrepareContext(ctx, createSessionSQL); err != nil {
		return fmt.Errorf("prepare session insert: %w", err)
	}
	return nil
}

// insertEvents inserts the events of every request that has no error of
// its own, with the seqs number gave them.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, reqs []*appendReq) error {
	rows := s.rows[:0]
	for _, r := range reqs {
		if r.err != nil {
			continue
		}
		for i := range r.evs {
			rows = append(rows, eventRow{ev: &r.evs[i], seq: r.first + int64(i)})
		}
	}
	defer func() { clear(rows); s.rows = rows[:0] }() // keep no events alive
	for len(rows) > 0 {
		i := min(len(s.inserts), bitLen(len(rows))) - 1 // the largest 1<<i <= len(rows)
		n := 1 << i
		if err := s.insertRows(ctx, tx.StmtContext(ctx, s.inserts[i]), rows[:n]); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// insertRows runs stmt, which inserts len(rows) rows, on rows.
func (s *Store) insertRows(ctx context.Context, stmt *sql.Stmt, rows []eventRow) error {
	args := s.args[:0]
	for _, r := range rows {
		ev := r.ev
		args = append(args, ev.SessionID, r.seq, ev.RunID, string(ev.Type), micros(ev.Time),
			[]byte(ev.Data), []byte(ev.Meta))
	}
	defer func() { clear(args); s.args = args[:0] }()
	if _, err := stmt.ExecContext(ctx, args...); err != nil {
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
func (s *Store) saveLastSeqs(ctx context.Context, tx *sql.Tx, lastSeqs map[string]int64) error {
	stmt := tx.StmtContext(ctx, s.saveSeq)
	for id, last := range lastSeqs {
		if _, err := stmt.ExecContext(ctx, last, id); err != nil {
			return fmt.Errorf("append events: update last seq of session %s: %w", id, err)
		}
	}
	return nil
}
