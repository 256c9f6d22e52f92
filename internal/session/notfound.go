package session

import "github.com/kerneld/kerneld/internal/errdefs"

// The not-found errors every store gives, with the stable codes clients
// see, so that no caller can tell the backends apart by their errors.

// SessionNotFound says there is no session id.
func SessionNotFound(id string) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeSessionNotFound, "session %s not found", id)
}

// RunNotFound says there is no run id.
func RunNotFound(id string) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeRunNotFound, "run %s not found", id)
}

// MemoryKeyNotFound says the session's memory has no entry key.
func MemoryKeyNotFound(key string) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeMemoryKeyNotFound, "memory key %q not found", key)
}
