package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
)

// migrationFiles holds the schema as numbered steps, NNNN_what.sql. A
// released step is never edited: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// applicationID marks a database as kerneld's ("krnd"); migration 1 sets it.
const applicationID = 0x6b726e64

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// migration is one schema step; applying it takes the database from
// version-1 to version (PRAGMA user_version).
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded steps in order. Versions must run 1, 2,
// 3… without gaps, or a database could skip a step.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for i, e := range entries { // ReadDir sorts by name
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d first in its name", e.Name(), i+1)
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	return ms, nil
}

// latestVersion is the schema version this build migrates to.
func latestVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// inspect refuses, without writing to it, a file at path that Open must
// not touch: one that is not SQLite, another program's SQLite database,
// or a kerneld database from a newer build. A missing or empty file
// without a WAL is a new database.
func inspect(ctx context.Context, path string) error {
	header, err := readHeader(path)
	if err != nil {
		return err
	}
	_, err = os.Stat(path + "-wal")
	hasWAL := err == nil
	if len(header) == 0 && !hasWAL {
		return nil
	}
	if len(header) > 0 && !bytes.Equal(header, []byte(sqliteHeader)) {
		return fmt.Errorf("%s is not a SQLite database; refusing to touch it", path)
	}
	// Read-only and without the writer's pragmas: journal_mode=WAL alone
	// would rewrite the header of a file we are about to refuse.
	params := url.Values{"mode": {"ro"}}
	if !hasWAL {
		// Without a WAL the file holds everything, and immutable keeps
		// SQLite from creating -wal and -shm files beside it.
		params.Set("immutable", "1")
	}
	db, err := sql.Open("sqlite", dsn(path, params))
	if err != nil {
		return fmt.Errorf("inspect database %s: %w", path, err)
	}
	defer func() { _ = db.Close() }() // read-only: nothing to lose
	var appID, version, objects int
	err = db.QueryRowContext(ctx, `SELECT (SELECT application_id FROM pragma_application_id),
		(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)`).
		Scan(&appID, &version, &objects)
	if err != nil {
		err = fmt.Errorf("%s cannot be read as a SQLite database; refusing to touch it: %w", path, err)
		if isCorrupt(err) {
			return &CorruptError{Path: path, Err: err}
		}
		return err
	}
	return checkVersion(path, appID, version, objects)
}

// checkVersion decides from the header fields and the number of schema
// objects whether Open may use the database: an untouched one, or one
// that migration 1 marked as kerneld's, at most at this build's version.
func checkVersion(path string, appID, version, objects int) error {
	untouched := objects == 0 && version == 0 && (appID == 0 || appID == applicationID)
	switch latest := latestVersion(); {
	case untouched:
		return nil
	case appID != applicationID || version == 0:
		return fmt.Errorf("%s is a SQLite database but not a kerneld one; refusing to touch it", path)
	case version > latest:
		return newerSchema(path, version, latest)
	}
	return nil
}

// newerSchema is the error for a database a newer kerneld has migrated:
// this build cannot know what the newer schema means.
func newerSchema(path string, have, know int) error {
	return fmt.Errorf("%s has schema version %d, newer than version %d that this kerneld knows; "+
		"refusing to open it (run a newer kerneld)", path, have, know)
}

// readHeader returns the first 16 bytes of the file at path, fewer if it
// is shorter, and none if it does not exist.
func readHeader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	b := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read database %s: %w", path, err)
	}
	return b[:n], nil
}

// migrate applies the steps db has not had yet, each in its own
// transaction together with the user_version that records it, so a
// failed step leaves the database at the previous version. It returns how
// many steps it applied.
func migrate(ctx context.Context, db *sql.DB, path string, log *slog.Logger) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	n := 0
	for _, m := range ms {
		applied, err := applyMigration(ctx, db, path, m, len(ms))
		if err != nil {
			return n, err
		}
		if applied {
			n++
			log.Info("applied schema migration", "path", path, "version", m.version, "file", m.name)
		}
	}
	return n, nil
}

// applyMigration applies m unless the database already has it, and says
// whether it did. It rereads the version inside the transaction, which
// holds the write lock, so the check and the step cannot interleave with
// anything.
func applyMigration(ctx context.Context, db *sql.DB, path string, m migration, latest int) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", path, err)
	}
	defer rollback(tx)
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return false, fmt.Errorf("migrate %s: read schema version: %w", path, err)
	}
	if version > latest {
		return false, newerSchema(path, version, latest)
	}
	if version >= m.version {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migrate %s: apply %s: %w", path, m.name, err)
	}
	// PRAGMA takes no bound parameters; m.version is an int we parsed.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, m.version)); err != nil {
		return false, fmt.Errorf("migrate %s: record version %d: %w", path, m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate %s: commit %s: %w", path, m.name, err)
	}
	return true, nil
}
