package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// reply is an error reply of a Redis server.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

var _ goredis.Error = reply("")

func TestUnavailable(t *testing.T) {
	refused := []error{
		reply("OOM command not allowed when used memory > 'maxmemory'."),
		reply("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."),
		reply("READONLY You can't write against a read only replica."),
		reply("LOADING Redis is loading the dataset in memory"),
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		fmt.Errorf("read: %w", syscall.ECONNRESET),
		io.EOF,
		goredis.ErrPoolTimeout,
	}
	for _, err := range refused {
		got := unavailable(t.Context(), err)
		if !errors.Is(got, errdefs.ErrUnavailable) || !errors.Is(got, err) {
			t.Errorf("unavailable(%v) = %v, want a StorageError wrapping it", err, got)
		}
	}
	kept := []error{
		reply("ERR FENCED 7"),
		reply("NOSCRIPT No matching script."),
		reply("ERR STALE"),
		errors.New("decode run: unexpected end of JSON input"),
		context.Canceled,
		goredis.Nil,
	}
	for _, err := range kept {
		if got := unavailable(t.Context(), err); got != err { //nolint:errorlint // the very error must come back
			t.Errorf("unavailable(%v) = %v, want it unchanged", err, got)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}
	if got := unavailable(ctx, timeout); got != timeout { //nolint:errorlint // the very error must come back
		t.Errorf("after the caller's context ended, unavailable(%v) = %v, want it unchanged", timeout, got)
	}
}
