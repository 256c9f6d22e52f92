package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// The reasons of a connection that failed or could not be made.
const (
	reasonConnection  = "the connection to Postgres failed"
	reasonUnreachable = "Postgres cannot be reached"
)

// refusals are the SQLSTATEs (or their classes, two characters) that mean
// Postgres cannot take a write now for a reason that passes, and what a
// client is told of each: the request was fine, so it hears 503
// storage_unavailable with Retry-After rather than 500.
var refusals = []struct{ code, reason string }{
	{"53100", "the Postgres disk is full"},
	{"53200", "Postgres is out of memory"},
	{"53300", "Postgres has too many connections"},
	{"53", "Postgres is short of resources"},
	{"25006", "Postgres is a read-only replica"},
	{"57P01", "Postgres is shutting down"},
	{"57P02", "Postgres is restarting"},
	{"57P03", "Postgres is starting up"},
	{"58", "Postgres failed a disk operation"},
	{"08", reasonConnection},
}

// unavailable returns err as an *errdefs.StorageError when it is one of
// the refusals or a connection that could not be made or was lost, else
// as it is. A failure after ctx ended is the caller's deadline or cancel.
func unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if _, ok := errors.AsType[*errdefs.StorageError](err); ok {
		return err
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		for _, r := range refusals {
			if strings.HasPrefix(pe.Code, r.code) {
				return errdefs.Storage(r.reason, err)
			}
		}
		return err
	}
	if unreachable(err) {
		return errdefs.Storage(reasonUnreachable, err)
	}
	return err
}

// unreachable reports whether err is a connection to Postgres that could
// not be made, or failed under a statement.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	for _, target := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, target) {
			return true
		}
	}
	return strings.Contains(err.Error(), "conn closed")
}
