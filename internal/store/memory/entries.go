package memory

import (
	"context"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// GetMemory returns the entry key of a session's memory.
func (s *Store) GetMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error) {
	var out session.MemoryEntry
	err := s.read(sessionID, func(rec *record) error {
		e, ok := rec.memory[key]
		if !ok {
			return session.MemoryKeyNotFound(key)
		}
		out = cloneEntry(e)
		return nil
	})
	return out, err
}

// PutMemory creates or replaces an entry. Creating one when the session
// already holds maxEntries is ErrExhausted; replacing one never is.
// maxEntries <= 0 means no limit.
func (s *Store) PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error {
	return s.write(e.SessionID, func(rec *record) error {
		_, exists := rec.memory[e.Key]
		if !exists && maxEntries > 0 && len(rec.memory) >= maxEntries {
			return errdefs.New(errdefs.ErrExhausted, errdefs.CodeMemoryFull,
				"session %s already holds %d memory entries", e.SessionID, maxEntries)
		}
		if rec.memory == nil {
			rec.memory = make(map[string]session.MemoryEntry)
		}
		rec.memory[e.Key] = cloneEntry(e)
		return nil
	})
}

// DeleteMemory removes the entry key of a session's memory.
func (s *Store) DeleteMemory(ctx context.Context, sessionID, key string) error {
	return s.write(sessionID, func(rec *record) error {
		if _, ok := rec.memory[key]; !ok {
			return session.MemoryKeyNotFound(key)
		}
		delete(rec.memory, key)
		return nil
	})
}

// ListMemory returns a session's entries sorted by key (byte order).
func (s *Store) ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error) {
	var out []session.MemoryEntry
	err := s.read(sessionID, func(rec *record) error {
		out = make([]session.MemoryEntry, 0, len(rec.memory))
		for _, e := range rec.memory {
			out = append(out, cloneEntry(e))
		}
		return nil
	})
	slices.SortFunc(out, func(a, b session.MemoryEntry) int { return strings.Compare(a.Key, b.Key) })
	return out, err
}
