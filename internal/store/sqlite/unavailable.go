package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// unavailable returns err, the failure of a write transaction, as an
// *errdefs.StorageError when it is SQLite saying the write cannot be made
// now for want of space or a writable file (a full disk, the page limit,
// a file system remounted read-only, an I/O error): the request was fine
// and a retry may succeed, so clients hear 503, not 500. Anything else is
// returned as it is.
func unavailable(err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff { // the primary code; extended codes add high bits
	case sqlite3.SQLITE_FULL:
		return errdefs.Storage("the disk is full", err)
	case sqlite3.SQLITE_READONLY:
		return errdefs.Storage("the database is read-only", err)
	case sqlite3.SQLITE_IOERR:
		return errdefs.Storage("the disk failed a write", err)
	}
	return err
}

// LimitPages caps the database at pages pages (PRAGMA max_page_count on
// the writer's connection, the only one that writes) and returns the cap
// SQLite settled on, never below the database's current size. A write
// past it fails as it would on a full disk, which is what tests use it
// for: filling the store to the brim without filling a file system.
// Raise it again with a large value. It waits for the writer to be
// between batches.
func (s *Store) LimitPages(ctx context.Context, pages int64) (int64, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var got int64
	// PRAGMA takes no bound parameters; pages is an int64.
	err := s.tx.conn.QueryRowContext(ctx, `PRAGMA max_page_count = `+strconv.FormatInt(pages, 10)).Scan(&got)
	if err != nil {
		return 0, fmt.Errorf("limit pages: %w", err)
	}
	return got, nil
}

// RefuseWrites makes every write fail as on a disk that takes none (one
// that is full to the last byte, or remounted read-only), or lifts that:
// PRAGMA query_only on the writer's connection, the only one that writes,
// so SQLite itself refuses them, as it would the real thing. A page limit
// (LimitPages) is not enough for that: updates in place and small rows
// still fit in the pages the database has. Tests use it; kerneld never
// does.
func (s *Store) RefuseWrites(ctx context.Context, refuse bool) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.tx.conn.ExecContext(ctx, `PRAGMA query_only = `+strconv.FormatBool(refuse)); err != nil {
		return fmt.Errorf("refuse writes: %w", err)
	}
	return nil
}
