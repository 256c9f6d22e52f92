package sqlite

import (
	"context"
	"errors"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// CorruptError reports that SQLite found the database file damaged: a page
// that is not what the b-tree above it says it is, or a file that is no
// longer a database. kerneld cannot repair that, and must not write on top
// of it, so the operator has to step in.
//
// Open does not look for damage ahead of time with PRAGMA quick_check,
// which reads the whole file: on 2 cores that took 1.7-2.4 s per GB with
// the file in the page cache and 7-10 s per GB from disk
// (BenchmarkQuickCheck), on every start, and damage that appears later
// would go unseen anyway. Damage is reported where a query reaches it:
// Open's own reads, startup recovery (cmd/kerneld passes its error through
// Diagnose) and, once serving, the request that reads the page or the
// event writer, whose failure Ping reports.
type CorruptError struct {
	Path string // the database file
	// Modified says whether this process changed the database before the
	// damage showed: it had migrated the schema or changed rows.
	Modified bool
	Err      error // SQLite's error
}

func (e *CorruptError) Error() string {
	state := "kerneld has not modified it"
	if e.Modified {
		state = "kerneld had already written to it"
	}
	return "the database file looks corrupted and " + state + "; restore it from a backup, " +
		"or salvage what SQLite can still read with the sqlite3 shell's .recover command: " + e.Err.Error()
}

func (e *CorruptError) Unwrap() error { return e.Err }

// isCorrupt reports whether err is SQLite saying the file is damaged.
func isCorrupt(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary code; extended codes add high bits
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// Diagnose returns err, or, if err is SQLite finding the database file
// damaged, a *CorruptError wrapping it that says so and whether this
// process had changed the database. After that, Close changes nothing
// more: it skips the PRAGMA optimize it otherwise runs. Call it on an
// error from any method, e.g. one startup recovery returned.
func (s *Store) Diagnose(err error) error {
	if err == nil || !isCorrupt(err) {
		return err
	}
	var cerr *CorruptError
	if errors.As(err, &cerr) {
		return err
	}
	s.corrupt.Store(true)
	return &CorruptError{Path: s.path, Modified: s.modified(), Err: err}
}

// modified reports whether this process has changed the database: applied
// a migration or changed rows through the writer, the one connection that
// writes. total_changes counts rows of statements that were rolled back
// too, so it errs towards yes.
func (s *Store) modified() bool {
	if s.migrated > 0 {
		return true
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var n int64
	err := s.tx.conn.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n)
	return err != nil || n > 0
}
