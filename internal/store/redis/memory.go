package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// A memory entry is stored as "<UpdatedAt in microseconds> <value>": two
// fields need no JSON, and the value stays readable in redis-cli.

// encodeEntry returns e as stored.
func encodeEntry(e session.MemoryEntry) []byte {
	b := strconv.AppendInt(make([]byte, 0, 21+len(e.Value)), micros(e.UpdatedAt), 10)
	return append(append(b, ' '), e.Value...)
}

// decodeEntry returns the entry key of session sessionID stored as v.
func decodeEntry(sessionID, key, v string) (session.MemoryEntry, error) {
	us, value, ok := strings.Cut(v, " ")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil {
		return session.MemoryEntry{}, fmt.Errorf("decode memory entry %q: malformed", key)
	}
	return session.MemoryEntry{SessionID: sessionID, Key: key, Value: []byte(value), UpdatedAt: fromMicros(n)}, nil
}

// GetMemory returns the entry key of a session's memory.
func (s *Store) GetMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error) {
	k := s.keysOf(sessionID)
	pipe := s.rdb.Pipeline()
	v := pipe.HGet(ctx, k.mem, key)
	exists := pipe.Exists(ctx, k.s)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return session.MemoryEntry{}, fmt.Errorf("get memory %q of session %s: %w", key, sessionID, err)
	}
	switch {
	case exists.Val() == 0:
		return session.MemoryEntry{}, session.SessionNotFound(sessionID)
	case errors.Is(v.Err(), goredis.Nil):
		return session.MemoryEntry{}, session.MemoryKeyNotFound(key)
	}
	return decodeEntry(sessionID, key, v.Val())
}

// PutMemory creates or replaces an entry. Creating one when the session
// already holds maxEntries is ErrExhausted; replacing one never is.
// maxEntries <= 0 means no limit.
func (s *Store) PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error {
	k := s.keysOf(e.SessionID)
	err := scriptMemoryPut.Run(ctx, s.rdb, []string{k.s, k.mem}, e.Key, encodeEntry(e), max(maxEntries, 0)).Err()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(e.SessionID)
	case isReply(err, replyFull):
		return errdefs.New(errdefs.ErrExhausted, errdefs.CodeMemoryFull,
			"session %s already holds %d memory entries", e.SessionID, maxEntries)
	case err != nil:
		return fmt.Errorf("put memory %q: %w", e.Key, err)
	}
	return nil
}

// DeleteMemory removes the entry key of a session's memory.
func (s *Store) DeleteMemory(ctx context.Context, sessionID, key string) error {
	k := s.keysOf(sessionID)
	err := scriptMemoryDelete.Run(ctx, s.rdb, []string{k.s, k.mem}, key).Err()
	if nf := notFound(err, sessionID, key); nf != nil {
		return nf
	}
	if err != nil {
		return fmt.Errorf("delete memory %q: %w", key, err)
	}
	return nil
}

// ListMemory returns a session's entries sorted by key (byte order).
func (s *Store) ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error) {
	k := s.keysOf(sessionID)
	pipe := s.rdb.Pipeline()
	all := pipe.HGetAll(ctx, k.mem)
	exists := pipe.Exists(ctx, k.s)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("list memory of session %s: %w", sessionID, err)
	}
	if exists.Val() == 0 {
		return nil, session.SessionNotFound(sessionID)
	}
	out := make([]session.MemoryEntry, 0, len(all.Val()))
	for key, v := range all.Val() {
		e, err := decodeEntry(sessionID, key, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b session.MemoryEntry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
