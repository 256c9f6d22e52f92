// Package postgres is kerneld's store on PostgreSQL, the system of record
// most teams already back up, replicate and restore to a point in time
// (DESIGN.md §6 and §8): sessions, runs, messages, memory entries and
// every session's event log in one database (and beside them the webhook
// outbox, schedules, images, quota counters and session feeds), with
// leases and fencing tokens so that only the replica owning a session
// appends to it, and the plumbing replicas need to talk (Signals) and to
// follow each other's appends (Tailer), both over LISTEN/NOTIFY.
//
// It satisfies kernel.Store without importing the kernel and passes
// store/storetest; it holds no kernel logic and does not log on the
// request path.
//
// # Schema
//
// The tables are the SQLite store's (migrations/0001_init.sql): times in
// microseconds, JSON documents as text, everything a session owns going
// with it by ON DELETE CASCADE, and the events table keyed (session_id,
// seq). The store uses the schema the connection's search_path names
// first, so several deployments (or tests) can share a database, each in
// a schema of its own (?search_path=name in the URL).
//
// Migrations are embedded and applied by Open under an advisory lock,
// recorded in kerneld_schema; a database at a newer version than this
// build knows is refused. The runner is our own forty lines rather than
// pressly/goose or golang-migrate: both would add a dependency tree (and
// golang-migrate a database/sql driver beside pgx) for what is one loop
// over embedded files, and neither refuses a newer schema on its own.
//
// # Writes
//
// Every write that must be atomic with its checks is one transaction that
// locks its session's row (FOR NO KEY UPDATE) first, so the checks of
// one session's writes (idempotency keys, the queue bound, the memory
// bound, a message's position) see each other. Event appends are
// group-committed: concurrent AppendEvents calls go through appenders
// that write whatever has queued with one statement, which checks the
// leases, numbers and inserts the events and notifies the tailers in one
// round trip (see events.go).
//
// # Leases
//
// A lease is a row of leases with a token from one sequence and an
// expiry by the database's clock, rather than an advisory lock: an
// advisory lock lives and dies with one connection, so a pooler such as
// pgbouncer (transaction mode) or a dropped connection would lose it
// silently, and it carries no token to fence a writer that paused past
// its lease. An append locks the lease row and checks the token in its
// own transaction, so a take-over waits for it, then wins.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Defaults for the zero Options fields.
const (
	// DefaultMaxConns bounds a replica's pool. Appends take at most
	// DefaultAppenders of them, the listener one more outside the pool.
	DefaultMaxConns = 16
	// DefaultStatementTimeout ends a statement Postgres has not finished
	// by then, so a stuck lock or a slow disk fails a request rather than
	// holding its connection for ever.
	DefaultStatementTimeout = 30 * time.Second
	// IdleInTransactionTimeout is Postgres' idle_in_transaction_session_timeout
	// for the store's connections. kerneld never waits inside a
	// transaction, but a replica that stops between two statements of one
	// (SIGSTOP, a frozen VM, a machine starved of CPU) would otherwise keep
	// its row locks, a session's lease row among them, and so keep every
	// other replica from taking its sessions over, for as long as it is
	// stopped. Postgres ends such a connection after this long instead;
	// the stopped replica finds it gone when it wakes, and its lease
	// fenced.
	IdleInTransactionTimeout = 5 * time.Second
	// DefaultAppenders is how many transactions of appends one replica
	// keeps in flight. One commits while the other gathers the next batch;
	// more only spread the same appends over more commits.
	DefaultAppenders = 2
)

// Options configures Open.
type Options struct {
	// URL locates the database: a libpq URL or key=value string
	// (postgres://user:pass@host:5432/db?sslmode=disable); what it leaves
	// out comes from the PG* environment variables, as with psql.
	URL string
	// MaxConns bounds the pool; 0 means DefaultMaxConns.
	MaxConns int
	// StatementTimeout is Postgres' statement_timeout for the store's
	// connections; 0 means DefaultStatementTimeout, negative none.
	StatementTimeout time.Duration
	// Logger receives what the background loops cannot return; nil
	// discards.
	Logger *slog.Logger
}

// Store is the PostgreSQL store. Open it with Open and release it with
// Close; every method is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	config *pgx.ConnConfig // the pool's, for the listener's own connection
	schema string          // the schema the tables are in
	log    *slog.Logger

	appends chan *appendReq
	stop    chan struct{}  // closed by Close: appenders drain and return
	wg      sync.WaitGroup // the appenders
	closeMu sync.RWMutex   // held to queue an append; Close takes it to set closed
	closed  bool
}

// Open connects to the database opts.URL names, migrates it to this
// build's schema and starts the appenders.
func Open(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := poolConfig(opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", unavailable(ctx, err))
	}
	s := &Store{pool: pool, config: cfg.ConnConfig, log: opts.Logger,
		appends: make(chan *appendReq, 1024), stop: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	for range DefaultAppenders {
		s.wg.Go(s.appender)
	}
	s.wg.Go(s.pruneLoop)
	return s, nil
}

// poolConfig parses opts into the pool's configuration. A parse error
// never quotes the URL, which may hold a password.
func poolConfig(opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			err = pe.Unwrap()
		} else {
			err = errors.New("cannot parse it")
		}
		return nil, errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidPostgresURL, "postgres url: %v", err)
	}
	cfg.MaxConns = int32(DefaultMaxConns)
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(min(opts.MaxConns, 1<<30))
	}
	timeout := opts.StatementTimeout
	if timeout == 0 {
		timeout = DefaultStatementTimeout
	}
	if timeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	}
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(IdleInTransactionTimeout.Milliseconds(), 10)
	cfg.ConnConfig.RuntimeParams["application_name"] = "kerneld"
	return cfg, nil
}

// Close stops the appenders, once the appends they hold are written, and
// closes the pool. Tailers and Signals made from the store must be closed
// first.
func (s *Store) Close() error {
	s.closeMu.Lock()
	already := s.closed
	s.closed = true
	s.closeMu.Unlock()
	if already {
		return nil
	}
	close(s.stop)
	s.wg.Wait()
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers, for /readyz.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", unavailable(ctx, err))
	}
	return nil
}

// Schema is the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// inTx runs fn in a transaction, committing if it returns nil. An error
// of Postgres refusing the write is an *errdefs.StorageError.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.failed(ctx, pgx.BeginFunc(ctx, s.pool, fn))
}

// failed returns err of a write as unavailable does and, when it says the
// connection was lost, drops the pool's other idle connections: they are
// most likely gone too (a restart, a failover, terminated backends), and
// dropping them now saves failing one write on each.
func (s *Store) failed(ctx context.Context, err error) error {
	err = unavailable(ctx, err)
	if lost(err) {
		s.pool.Reset()
	}
	return err
}

// lost reports whether err says the connection to Postgres was lost or
// could not be made.
func lost(err error) bool {
	se, ok := errors.AsType[*errdefs.StorageError](err)
	return ok && (se.Reason == reasonUnreachable || strings.HasPrefix(se.Reason, reasonConnection))
}
