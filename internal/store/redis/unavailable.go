package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// unavailableHook turns the errors that say Redis cannot take a write now,
// for a reason that passes, into *errdefs.StorageError on every command
// and pipeline of the store's client, so that callers answer 503, not
// 500, whatever method failed: Redis out of memory under noeviction, a
// failed snapshot with stop-writes-on-bgsave-error, a read-only replica,
// a server loading its data, and a connection that cannot be made or was
// lost. The commands' own errors are replaced too, since the store reads
// most replies through them.
type unavailableHook struct{}

func (unavailableHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (unavailableHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			err = unavailable(ctx, err)
			cmd.SetErr(err)
		}
		return err
	}
}

func (unavailableHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				cmd.SetErr(unavailable(ctx, e))
			}
		}
		return unavailable(ctx, err)
	}
}

// The error replies that mean Redis refuses writes for now, and what a
// client is told of each.
var refusals = []struct{ code, reason string }{
	{"OOM", "Redis is out of memory"},
	{"MISCONF", "Redis cannot save to disk"},
	{"READONLY", "Redis is a read-only replica"},
	{"LOADING", "Redis is loading its data"},
	{"MASTERDOWN", "Redis lost its primary"},
	// A MULTI whose queued command was refused (OOM, mostly) fails as a
	// whole with EXECABORT; kerneld queues no malformed commands.
	{"EXECABORT", "Redis refused a command of a transaction"},
}

// unavailable returns err as an *errdefs.StorageError when it is one of
// the refusals or a connection failure, else as it is. A failure after
// ctx ended is the caller's deadline or cancel, not Redis'.
func unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if _, ok := errors.AsType[*errdefs.StorageError](err); ok {
		return err
	}
	if text, ok := replyText(err); ok {
		for _, r := range refusals {
			if strings.HasPrefix(text, r.code+" ") || text == r.code {
				return errdefs.Storage(r.reason, err)
			}
		}
		return err
	}
	if unreachable(err) {
		return errdefs.Storage("Redis cannot be reached", err)
	}
	return err
}

// unreachable reports whether err is a connection to Redis that could not
// be made, or failed under a command.
func unreachable(err error) bool {
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	for _, target := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNREFUSED, syscall.ECONNRESET,
		syscall.EPIPE, goredis.ErrPoolTimeout} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
