package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"runtime"
	"sync"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// maxReaderStmts bounds the statements one reader keeps prepared. The
// store's reads have a few dozen shapes; a listing with an unusual mix of
// filters past the bound is parsed for its one use, as before.
const maxReaderStmts = 64

// readers is the read-only half of Store: a fixed set of connections,
// each handed to one read at a time and keeping prepared every statement
// it has run. Parsing a read statement again on every call was a fifth of
// the server's CPU while many short runs streamed (sqlite3_prepare_v2 and
// re-preparing after each bind); a prepared statement is bound, stepped and
// reset instead. database/sql's *sql.Stmt would prepare on every pooled
// connection too, but looks its connection up under locks and registers
// each use in a transaction; a connection of our own runs its statements
// as they are, BEGIN and COMMIT of ReadEvents' read transaction included.
//
// Connections open on first use, so an idle store holds only those its
// start needed (WAL lets them read while the writer commits; each read
// sees only committed data).
type readers struct {
	db   *sql.DB       // read-only pool the connections come from
	idle chan *reader  // every reader not in use, opened or not
	once sync.Once     // of close
	done chan struct{} // closed by close: acquire fails from then on
}

// reader is one read connection and the statements prepared on it. Only
// the read holding it uses it.
type reader struct {
	conn  *sql.Conn // nil until first used
	stmts map[string]*sql.Stmt
}

// openReaders opens the read-only pool behind the readers. A connection
// stays open once opened: a new one re-reads the schema, which costs more
// than a small query.
func (rs *readers) openReaders(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", dsn(path, url.Values{
		"mode":    {"ro"},
		"_pragma": {"busy_timeout(5000)"},
	}))
	if err != nil {
		return fmt.Errorf("open database %s for reading: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close() // the ping error says more
		return fmt.Errorf("open database %s for reading: %w", path, err)
	}
	rs.db, rs.idle, rs.done = db, make(chan *reader, n), make(chan struct{})
	for range n {
		rs.idle <- &reader{}
	}
	return nil
}

// acquire returns a reader for the caller alone, opening its connection
// on first use, or fails if ctx ends first or the store is closed. The
// caller gives it back with release.
func (rs *readers) acquire(ctx context.Context) (*reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var r *reader
	select {
	case r = <-rs.idle:
	case <-rs.done:
		return nil, errClosed()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.conn != nil {
		return r, nil
	}
	conn, err := rs.db.Conn(ctx)
	if err != nil {
		rs.idle <- r
		return nil, err
	}
	r.conn, r.stmts = conn, make(map[string]*sql.Stmt)
	return r, nil
}

// release gives r back for the next read.
func (rs *readers) release(r *reader) { rs.idle <- r }

// close closes every reader's statements and connection, then the pool.
// Reads in flight finish first: close takes every reader back, so none
// can open a connection after it.
func (rs *readers) close() error {
	if rs.db == nil {
		return nil
	}
	rs.once.Do(func() { close(rs.done) })
	for range cap(rs.idle) {
		(<-rs.idle).discard()
	}
	return rs.db.Close()
}

func errClosed() error {
	return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStoreClosed, "store is closed")
}

// discard closes r's statements and connection; r opens a new one when
// next acquired.
func (r *reader) discard() {
	for _, stmt := range r.stmts {
		_ = stmt.Close() // a finalize error leaves nothing to do
	}
	if r.conn != nil {
		_ = r.conn.Close() // the pool's Close reports
	}
	r.conn, r.stmts = nil, nil
}

// end ends the read transaction begun on r with BEGIN, deferred by the
// read that began it, whatever its context says by then. A connection
// whose transaction would not end is discarded: left open, its snapshot
// would keep every checkpoint from reaching the end of the WAL.
func (r *reader) end() {
	if err := r.exec(context.Background(), `ROLLBACK`); err != nil {
		r.discard()
	}
}

// stmt returns query prepared on r, preparing it on first use; nil if r
// already holds maxReaderStmts and query is not among them.
func (r *reader) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if stmt, ok := r.stmts[query]; ok {
		return stmt, nil
	}
	if len(r.stmts) >= maxReaderStmts {
		return nil, nil
	}
	stmt, err := r.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	r.stmts[query] = stmt
	return stmt, nil
}

// query runs query on r with args, prepared.
func (r *reader) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	stmt, err := r.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case stmt == nil:
		return r.conn.QueryContext(ctx, query, args...)
	}
	return stmt.QueryContext(ctx, args...)
}

// queryRow runs query on r with args, prepared, for at most one row.
func (r *reader) queryRow(ctx context.Context, query string, args ...any) scanner {
	stmt, err := r.stmt(ctx, query)
	switch {
	case err != nil:
		return errRow{err}
	case stmt == nil:
		return r.conn.QueryRowContext(ctx, query, args...)
	}
	return stmt.QueryRowContext(ctx, args...)
}

// exec runs a statement of query on r, prepared, for its effect.
func (r *reader) exec(ctx context.Context, query string) error {
	stmt, err := r.stmt(ctx, query)
	switch {
	case err != nil:
		return err
	case stmt == nil:
		_, err = r.conn.ExecContext(ctx, query)
	default:
		_, err = stmt.ExecContext(ctx)
	}
	return err
}

// maxBriefRows is the most rows a read by an index makes and still counts
// as brief.
const maxBriefRows = 256

// brief returns ctx without its cancellation, for the statements of a
// read that an index bounds to a few rows. For a context that can be
// cancelled the driver and database/sql each start a goroutine per
// statement to watch it, which cost a third of such a read, and the read
// is over in microseconds anyway; a read that may be long keeps ctx, so
// that a client that leaves stops it.
func brief(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// errRow is a row whose query could not run.
type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }
