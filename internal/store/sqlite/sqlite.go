// Package sqlite is kerneld's durable default store: sessions, runs,
// messages, memory entries and every session's event log in one SQLite
// database file in WAL mode, through the pure-Go modernc.org/sqlite driver
// (so kerneld still builds with CGO_ENABLED=0).
//
// It owns the database file, the kerneld.lock file beside it that keeps a
// second kerneld out, and two goroutines: the writer that group-commits
// every write (see writer) and the checkpointer that copies the WAL back
// into the database file. It satisfies kernel.Store without importing the
// kernel, holds no kernel logic (it stores what it is given, with the
// memory store's semantics and error codes), and does not log on the
// request path: errors go back to the caller.
//
// Connections: one writer *sql.DB with a single connection, which the
// writer goroutine holds and every write goes through; read-only
// connections beside it, each keeping its statements prepared (see
// readers); and one connection that only runs checkpoints.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Defaults for the zero Options fields.
const (
	DefaultBatchDelay = time.Millisecond
	DefaultMaxBatch   = 1024
)

// Options configures Open.
type Options struct {
	// Path is the database file, e.g. ./data/kerneld.db. Its directory is
	// created if missing and also holds the lock file.
	Path   string
	Logger *slog.Logger // nil discards
	// BatchDelay is the longest the writer waits for more writes after
	// the first before it commits; 0 means DefaultBatchDelay.
	BatchDelay time.Duration
	// MaxBatch caps the events one transaction appends, each other write
	// counting as one event; 0 means DefaultMaxBatch. A single larger
	// AppendEvents call still commits whole, alone in its transaction.
	MaxBatch int
	// Now is the clock leases expire by; nil means time.Now.
	Now func() time.Time
}

// Store is the SQLite store. Open it with Open and release it with Close;
// every method is safe for concurrent use.
type Store struct {
	path string
	log  *slog.Logger
	lock *os.File
	wdb  *sql.DB // one connection, the writer's: SQLite has one writer at a time anyway

	readers

	writer
	leases    leaseTable
	ckpt      checkpointer
	migrated  int         // schema migrations Open applied
	corrupt   atomic.Bool // Diagnose found the file damaged: Close must not write
	closeOnce sync.Once
	closeErr  error
}

// Open opens or creates the database at opts.Path, migrates it to this
// build's schema, and starts the writer. It refuses a file that is
// not a SQLite database, a SQLite database that is not kerneld's, one with
// a newer schema than this build knows, and a data directory another
// kerneld holds; in each case without writing to the file. Every error
// names the database file; one for a damaged file is a *CorruptError.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("open store: no database path")
	}
	path, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", opts.Path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("open database %s: create data directory: %w", path, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s, err := open(ctx, path, opts)
	if err != nil {
		_ = unlockDir(lock) // the open error is the one to report
		return nil, err
	}
	s.lock = lock
	s.startWriter()
	s.ckpt.start()
	s.log.Info("store opened", "path", path)
	return s, nil
}

// open checks and migrates the file at path and opens its connections.
func open(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := inspect(ctx, path); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{path: path, log: log}
	s.init(opts)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s.leases.init(now)
	s.tx.leases = &s.leases
	var err error
	if s.wdb, err = openWriter(ctx, path); err != nil {
		return nil, s.openError(err)
	}
	if s.migrated, err = migrate(ctx, s.wdb, path, log); err == nil {
		if err = s.tx.open(ctx, s.wdb); err != nil {
			err = fmt.Errorf("open database %s: %w", path, err)
		}
	}
	if err == nil {
		if err = s.openReaders(ctx, path); err != nil {
			s.tx.close()
		}
	}
	if err == nil {
		if err = s.ckpt.open(path); err != nil {
			s.tx.close()
			_ = s.readers.close() // err says what went wrong
		}
	}
	if err != nil {
		_ = s.wdb.Close() // err says what went wrong
		return nil, s.openError(err)
	}
	return s, nil
}

// openError makes err, which names the file already, a *CorruptError if
// the file is damaged. Nothing is written after it: open closes the
// connections without the PRAGMA optimize of Close.
func (s *Store) openError(err error) error {
	if !isCorrupt(err) {
		return err
	}
	return &CorruptError{Path: s.path, Modified: s.migrated > 0, Err: err}
}

// dsn returns the driver's name for the database at path: a file: URI, so
// that SQLite sees the query parameters and any path is escaped.
func dsn(path string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: params.Encode()}
	return u.String()
}

// writerPragmas configure the writer connection. The first four are the
// contract: WAL, so readers run beside the writer; synchronous=NORMAL, so
// a commit survives a crash of the process (only an OS crash or power loss
// can lose the last ones) without an fsync per commit; a busy timeout;
// foreign keys, for the cascading deletes. The others were measured with
// BenchmarkAppendConcurrentSessions on 2 cores:
//   - temp_store=MEMORY keeps the statement journal of the multi-row
//     INSERTs in memory instead of a temporary file: +25-30% events/s;
//   - a 64 MiB page cache holds the pages a thousand concurrent sessions
//     append to: +19% events/s at 1000 sessions;
//   - wal_autocheckpoint=10000 pages (40 MiB) leaves checkpoints to the
//     checkpointer, which the default of 1000 pages pre-empts inline in
//     the writer (+20-38%), and keeps the writer's own as a bound on the
//     WAL.
var writerPragmas = []string{
	"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)",
	"temp_store(MEMORY)", "cache_size(-65536)", "wal_autocheckpoint(10000)",
}

// openWriter opens the writer pool: one connection, with BEGIN IMMEDIATE
// so a transaction holds the write lock from its start.
func openWriter(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, url.Values{
		"_pragma": writerPragmas,
		"_txlock": {"immediate"},
	}))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close() // the ping error says more
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

// Close commits the writes already queued, stops the writer and the
// checkpointer, closes the database and releases the data directory.
// Writes made after Close has begun fail with ErrUnavailable; reads fail
// too. Calling Close again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	s.stopWriter()
	errs := []error{s.ckpt.stop()}
	if !s.corrupt.Load() {
		// Recommended before closing a long-lived connection: refreshes
		// the planner's statistics where they have drifted, usually doing
		// nothing. It may write, which a damaged file must be spared.
		_, err := s.wdb.ExecContext(context.Background(), `PRAGMA optimize`)
		errs = append(errs, err)
	}
	// The writer closes last: the last connection to close checkpoints
	// the WAL into the database file and removes it. A checkpoint copies
	// committed pages only: none of ours if Diagnose found the file
	// unmodified.
	errs = append(errs, s.readers.close(), s.wdb.Close(), unlockDir(s.lock))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	s.log.Info("store closed", "path", s.path)
	return nil
}

// Ping reports whether the store can serve: it fails while the writer's
// last transaction failed (until one commits again), and when a trivial
// query on the read pool does. Both matter: with a full disk or a file
// system remounted read-only, reads go on succeeding while every write
// fails.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.lastFailure(); err != nil {
		return fmt.Errorf("ping store: the last write failed: %w", err)
	}
	r, err := s.acquire(ctx)
	if err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	defer s.release(r)
	var n int
	if err := r.queryRow(brief(ctx), `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// Stats counts the writes a store has made durable since it was opened;
// metrics export them, and tests use them to see group commit work.
type Stats struct {
	Appends int64 // AppendEvents calls that succeeded
	Events  int64 // events they appended
	Commits int64 // transactions that appended them
	Writes  int64 // other write calls that succeeded
	Batches int64 // transactions the writer committed, whatever they held
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Appends: s.appends.Load(), Events: s.events.Load(), Commits: s.commits.Load(),
		Writes: s.writes.Load(), Batches: s.batches.Load()}
}

// counters is the part of Stats the writer updates.
type counters struct {
	appends, events, commits, writes, batches atomic.Int64
}
