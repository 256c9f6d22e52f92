package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// memoryKey is the shape of a memory key.
var memoryKey = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,128}$`)

// GetMemory returns one entry of a session's memory.
func (k *Kernel) GetMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return session.MemoryEntry{}, err
	}
	sessionID = s.ID // the key it is stored under
	return k.getMemory(ctx, sessionID, key)
}

func (k *Kernel) getMemory(ctx context.Context, sessionID, key string) (session.MemoryEntry, error) {
	if err := checkMemoryKey(key); err != nil {
		return session.MemoryEntry{}, err
	}
	e, err := k.store.GetMemory(ctx, sessionID, key)
	if errors.Is(err, errdefs.ErrNotFound) {
		return e, session.MemoryKeyNotFound(key)
	}
	if err != nil {
		return e, fmt.Errorf("get memory: %w", err)
	}
	return e, nil
}

// ListMemory returns all entries of a session's memory, sorted by key.
func (k *Kernel) ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sessionID = s.ID // the key it is stored under
	entries, err := k.store.ListMemory(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list memory: %w", err)
	}
	return entries, nil
}

// PutMemory creates or replaces an entry of an open session's memory.
func (k *Kernel) PutMemory(ctx context.Context, sessionID, key string, value json.RawMessage) (session.MemoryEntry, error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return session.MemoryEntry{}, err
	}
	if s.State == session.StateClosed {
		return session.MemoryEntry{}, sessionClosed(s.ID)
	}
	return k.putMemory(ctx, s.ID, key, value)
}

func (k *Kernel) putMemory(ctx context.Context, sessionID, key string, value json.RawMessage) (session.MemoryEntry, error) {
	e, err := k.memoryEntry(key, value)
	if err != nil {
		return e, err
	}
	e.SessionID, e.UpdatedAt = sessionID, k.now().UTC()
	if err := k.store.PutMemory(ctx, e, k.limits.MaxMemoryEntries); err != nil {
		if errors.Is(err, errdefs.ErrExhausted) {
			return e, errdefs.New(errdefs.ErrExhausted, errdefs.CodeMemoryFull,
				"session memory holds its maximum of %d entries", k.limits.MaxMemoryEntries)
		}
		return e, fmt.Errorf("put memory: %w", err)
	}
	return e, nil
}

// DeleteMemory removes one entry of a session's memory.
func (k *Kernel) DeleteMemory(ctx context.Context, sessionID, key string) error {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return err
	}
	sessionID = s.ID // the key it is stored under
	if s.State == session.StateClosed {
		return sessionClosed(s.ID)
	}
	if err := checkMemoryKey(key); err != nil {
		return err
	}
	err = k.store.DeleteMemory(ctx, sessionID, key)
	if errors.Is(err, errdefs.ErrNotFound) {
		return session.MemoryKeyNotFound(key)
	}
	if err != nil {
		return fmt.Errorf("delete memory: %w", err)
	}
	return nil
}

// memoryEntry validates key and value and returns the entry, its value
// compacted.
func (k *Kernel) memoryEntry(key string, value json.RawMessage) (session.MemoryEntry, error) {
	if err := checkMemoryKey(key); err != nil {
		return session.MemoryEntry{}, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, value); err != nil || buf.Len() == 0 {
		return session.MemoryEntry{}, errdefs.Invalid("value", "must be a JSON value")
	}
	if buf.Len() > k.limits.MaxMemoryValueBytes {
		return session.MemoryEntry{}, errdefs.Invalid("value", fmt.Sprintf("longer than %d bytes", k.limits.MaxMemoryValueBytes))
	}
	return session.MemoryEntry{Key: key, Value: buf.Bytes()}, nil
}

// checkMemoryKey reports whether key has the shape of a memory key.
func checkMemoryKey(key string) error {
	if !memoryKey.MatchString(key) {
		return errdefs.Invalid("key", "must be 1 to 128 characters of A-Z a-z 0-9 . _ - /")
	}
	return nil
}

// memoryEntries validates the initial memory of a new session.
func (k *Kernel) memoryEntries(m map[string]json.RawMessage) ([]session.MemoryEntry, error) {
	if len(m) > k.limits.MaxMemoryEntries {
		return nil, errdefs.Invalid("memory", fmt.Sprintf("more than %d entries", k.limits.MaxMemoryEntries))
	}
	var v *errdefs.ValidationError
	entries := make([]session.MemoryEntry, 0, len(m))
	for key, value := range m {
		e, err := k.memoryEntry(key, value)
		if ve, ok := errors.AsType[*errdefs.ValidationError](err); ok {
			for _, problem := range ve.Problems {
				v = v.Add("memory."+key, problem)
			}
			continue
		}
		entries = append(entries, e)
	}
	return entries, v.Err()
}

// sessionMemory is a session's memory as the built-in tools see it.
type sessionMemory struct {
	k         *Kernel
	sessionID string
}

// Get implements tools.Memory.
func (m sessionMemory) Get(ctx context.Context, key string) (json.RawMessage, error) {
	e, err := m.k.getMemory(ctx, m.sessionID, key)
	return json.RawMessage(e.Value), err
}

// Set implements tools.Memory.
func (m sessionMemory) Set(ctx context.Context, key string, value json.RawMessage) error {
	_, err := m.k.putMemory(ctx, m.sessionID, key, value)
	return err
}
