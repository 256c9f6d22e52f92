// Package redis is kerneld's shared store for several replicas (DESIGN.md
// §6 and §8): sessions, runs, messages, memory entries and every session's
// event log in one Redis, with leases and fencing tokens so that only the
// replica owning a session appends to it, and the plumbing replicas need to
// talk (Signals) and to follow each other's appends (Tailer).
//
// It satisfies kernel.Store without importing the kernel and passes
// store/storetest; it holds no kernel logic and does not log on the request
// path. Its durability is Redis' own: see PersistenceWarning.
//
// # Layout
//
// Every key starts with Options.Prefix (P below). A session's keys carry
// its id as a hash tag, so they would share a hash slot in a cluster, and
// DeleteSession removes them together:
//
//	P{id}:s      hash: rec (the Session as JSON), last_seq, last_batch, ver, fence
//	             (the last lease token), runn (runs created), and copies
//	             of the indexed fields, its order key and the keys of its
//	             metadata indexes
//	P{id}:ev     stream: the event log, up to 32 events an entry, packed, the
//	             entry's id <seq>-0 the seq of its last (see entries.go)
//	P{id}:lease  string "<token> <holder>" with the lease's TTL
//	P{id}:runs   hash: run id → the Run as JSON
//	P{id}:runm   hash: run id → "version TAB state TAB created TAB n TAB key"
//	P{id}:runi   sorted set: run ids scored by n, their creation number
//	P{id}:runst  sorted set: "state NUL n NUL run id", by state then n
//	P{id}:idem   sorted set: "key NUL n NUL run id" of runs with a key
//	P{id}:msgs   list: the history's messages as JSON; position = index+1
//	P{id}:mem    hash: memory key → "<micros> <value>"
//
// Records are whole JSON documents so that a new field of session.Session
// or session.Run needs no change here; only the fields that indexes and
// scripts read are kept beside them. Renaming or removing a field is a
// migration: TestStoredRecordsStayReadable guards the stored names.
//
// Indexes across sessions are sorted sets whose members are the sessions'
// order keys, CreatedAt in microseconds as 16 hex digits then the id (see
// orderKey), so that bytewise they sort as listings do: the "lex" ones
// hold score 0 and are read in that order, a page at a time.
//
//	P idx:all, idx:tenant:<t>, idx:agent:<a>, idx:state:<s>,
//	  idx:parent:<p>, idx:fork:<f>, idx:meta:<len(k)>:<k><v>          lex
//	P idx:expires  by ExpiresAt (only sessions with one)
//	P idx:updated  by UpdatedAt; P idx:closed the same for closed sessions
//	P runs:<state> "run id TAB session id" by CreatedAt (ListRunsByState)
//
// and for the replicas' plumbing: the Pub/Sub channel P signals, and the
// Tailer's wake-up streams P tail:<tailer id>:<shard>, deleted at Close
// (or expiring a day after their last use).
//
// Every write is one Lua script (EVALSHA), so a write and its index
// changes are atomic. Scripts name the per-session keys in KEYS but build
// the cross-session index keys from P themselves; a Redis Cluster would
// need those per slot, which is a later step.
package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// DefaultPrefix is the key prefix of the zero Options.Prefix.
const DefaultPrefix = "kerneld:"

// DefaultTailConns is the zero Options.TailConns. A wake-up costs Redis
// time in proportion to the streams the woken XREAD names, so the lag from
// an append to its delivery grows with the sessions per connection. With
// 1000 followed sessions BenchmarkTailerLag measured p50/p99 of
// 686 µs/18 ms on 4 connections, 471 µs/9.9 ms on 8 and 272 µs/5.7 ms on
// 16 (one session: 76 µs/0.5 ms), on a busy 2-core machine.
const DefaultTailConns = 8

// Options configures Open.
type Options struct {
	// URL locates the server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS, with go-redis' query options (e.g. ?pool_size=20).
	URL string
	// Prefix starts every key, so several deployments can share a server;
	// "" means DefaultPrefix. It must not contain '{' or '}', which would
	// change the keys' hash slots.
	Prefix string
	// TailConns bounds the connections a Tailer blocks on; 0 means
	// DefaultTailConns.
	TailConns int
	// Logger receives what the background loops of Signals and Tailer
	// cannot return (lost connections); nil discards.
	Logger *slog.Logger
}

// Store is the Redis store. Open it with Open and release it with Close;
// every method is safe for concurrent use.
type Store struct {
	rdb    goredis.UniversalClient
	url    string // Options.URL, for the Tailer's own connections
	prefix string
	tails  int
	log    *slog.Logger
	// batches numbers this store's event batches; with batchTag, unique
	// to this process, it names each batch so a resent one is recognised.
	batches  atomic.Uint64
	batchTag string
}

// Open connects to the server opts.URL names, checks that it answers and
// loads the store's scripts.
func Open(ctx context.Context, opts Options) (*Store, error) {
	ro, err := goredis.ParseURL(opts.URL)
	if err != nil {
		// A *url.Error quotes the URL, password and all; keep its reason.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidRedisURL, "redis url: %v", err)
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidRedisPrefix,
			"redis key prefix %q must not contain { or }", prefix)
	}
	// A write whose reply is lost may have been applied: running it again
	// would append a batch twice or report a conflict with itself, so the
	// error goes back to the caller instead, whatever the URL asks. Event
	// appends, which a dropped connection must not end a run over, carry
	// an id that makes them safe to send again (see AppendEvents).
	ro.MaxRetries = -1
	s := &Store{rdb: goredis.NewClient(ro), url: opts.URL, prefix: prefix, tails: opts.TailConns, log: opts.Logger,
		batchTag: rand.Text()[:12] + "-"}
	s.rdb.AddHook(unavailableHook{})
	if s.tails <= 0 {
		s.tails = DefaultTailConns
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.load(ctx); err != nil {
		_ = s.rdb.Close() // the error that matters is load's
		return nil, err
	}
	return s, nil
}

// load checks that the server answers and loads every script, so the
// first call of each is an EVALSHA that hits.
func (s *Store) load(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to redis: %w", err)
	}
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load redis scripts: %w", err)
		}
	}
	return nil
}

// Close closes the store's connections. Tailers and Signals made from the
// store must be closed first.
func (s *Store) Close() error { return s.rdb.Close() }

// Ping reports whether the server answers, for /readyz.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}

// keys names the keys of one session.
type keys struct{ s, ev, lease, runs, runm, runi, runst, idem, msgs, mem string }

// sessionKey returns the key of session id's hash.
func (s *Store) sessionKey(id string) string { return s.prefix + "{" + id + "}:s" }

// all returns every key of the session, its hash and run meta first (as
// session_delete.lua expects).
func (k keys) all() []string {
	return []string{k.s, k.runm, k.ev, k.lease, k.runs, k.runi, k.runst, k.idem, k.msgs, k.mem}
}

// keysOf returns every key of session id.
func (s *Store) keysOf(id string) keys {
	tag := s.prefix + "{" + id + "}:"
	return keys{
		s: tag + "s", ev: tag + "ev", lease: tag + "lease",
		runs: tag + "runs", runm: tag + "runm", runi: tag + "runi", runst: tag + "runst", idem: tag + "idem",
		msgs: tag + "msgs", mem: tag + "mem",
	}
}

// Script error replies. Scripts check everything before their first write
// and answer one of these instead of writing anything.
const (
	replyNoSession = "NOSESSION"
	replyNoRun     = "NORUN"
	replyNoKey     = "NOKEY"
	replyExists    = "EXISTS"
	replyStale     = "STALE"
	replyFenced    = "FENCED"
	replyHeld      = "HELD"
	replyFull      = "FULL"
)

// isReply reports whether err is the script error reply code.
func isReply(err error, code string) bool {
	text, ok := replyText(err)
	return ok && (text == code || strings.HasPrefix(text, code+" "))
}

// replyText returns the text of a script's error reply. Redis 7 puts
// "ERR " before a code a script gives; earlier versions do not.
func replyText(err error) (string, bool) {
	var re goredis.Error
	if !errors.As(err, &re) {
		return "", false
	}
	return strings.TrimPrefix(re.Error(), "ERR "), true
}

// replyDetail returns what follows the code in a script's error reply.
func replyDetail(err error) string {
	text, _ := replyText(err)
	_, detail, _ := strings.Cut(text, " ")
	return detail
}

// micros is how times are kept where scripts or indexes read them:
// microseconds since the Unix epoch, as SQLite keeps them.
func micros(t time.Time) int64 { return t.UnixMicro() }

// optMicros is micros, or "" for the zero time (an unset expiry).
func optMicros(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return itoa(t.UnixMicro())
}

// fromMicros is the inverse of micros; times come back in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// notFound maps the not-found replies of a script run for session id (and
// run or key name) to the errors every store gives.
func notFound(err error, id, name string) error {
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(id)
	case isReply(err, replyNoRun):
		return session.RunNotFound(name)
	case isReply(err, replyNoKey):
		return session.MemoryKeyNotFound(name)
	}
	return nil
}
