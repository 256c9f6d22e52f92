// Package errdefs defines the kinds of error kerneld reports and the
// coded error that carries a stable, client-facing name with them.
//
// It is a leaf package: it imports nothing from kerneld, so every layer can
// classify its failures the same way. Only internal/httpapi turns a kind
// into an HTTP status.
package errdefs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The kinds. Code wraps them with context and callers test with errors.Is.
var (
	ErrInvalid       = errors.New("invalid")            // the caller sent something malformed
	ErrNotFound      = errors.New("not found")          // no such session, agent, run or key
	ErrConflict      = errors.New("conflict")           // wrong state, e.g. a run is active
	ErrExhausted     = errors.New("resource exhausted") // a limit or quota was reached
	ErrUnavailable   = errors.New("unavailable")        // shutting down or not ready, try later
	ErrUpstream      = errors.New("upstream failure")   // a model provider or tool failed
	ErrUnprocessable = errors.New("unprocessable")      // well-formed but cannot be acted on, e.g. an agent lacks its API key
)

// Error is an error of one kind with a stable snake_case Code that clients
// can switch on (for example "session_busy"). Message must be safe to show
// a client: no secrets, no raw upstream bodies.
type Error struct {
	Kind    error
	Code    Code
	Message string
	// Extra holds problem-detail extension members, e.g. "active_run_id".
	Extra map[string]any
}

// New returns an *Error of the given kind and code with a formatted message.
func New(kind error, code Code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns e with an extension member added.
func (e *Error) With(key string, value any) *Error {
	if e.Extra == nil {
		e.Extra = make(map[string]any, 1)
	}
	e.Extra[key] = value
	return e
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is e's kind, so errors.Is(err, ErrConflict) works.
func (e *Error) Is(target error) bool { return target == e.Kind }

// ValidationError lists request fields and what is wrong with each.
// It matches ErrInvalid.
type ValidationError struct {
	Problems map[string]string
}

// Invalid returns a ValidationError for a single field.
func Invalid(field, problem string) *ValidationError {
	return &ValidationError{Problems: map[string]string{field: problem}}
}

// Add records a problem with field and returns v, creating it if nil.
func (v *ValidationError) Add(field, problem string) *ValidationError {
	if v == nil {
		v = &ValidationError{}
	}
	if v.Problems == nil {
		v.Problems = make(map[string]string)
	}
	v.Problems[field] = problem
	return v
}

// Err returns v as an error, or nil if it holds no problems. It lets
// validators collect problems and return `v.Err()` at the end.
func (v *ValidationError) Err() error {
	if v == nil || len(v.Problems) == 0 {
		return nil
	}
	return v
}

func (v *ValidationError) Error() string {
	fields := slices.Sorted(maps.Keys(v.Problems))
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f + ": " + v.Problems[f]
	}
	return "invalid " + strings.Join(parts, "; ")
}

// Is makes a ValidationError match ErrInvalid.
func (v *ValidationError) Is(target error) bool { return target == ErrInvalid }

// CodeOf returns the Code of the first *Error in err's chain, or "".
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// StorageError reports that the store could not take a write for a reason
// that passes by itself or with an operator's help, not because of the
// request: its disk is full, it refuses writes (Redis out of memory or
// unable to persist), or it cannot be reached. It matches ErrUnavailable,
// so clients hear 503 storage_unavailable and retry; the stores return it
// so that no layer above has to know their error codes.
type StorageError struct {
	// Reason says what is wrong in words safe to show a client, e.g.
	// "the disk is full".
	Reason string
	Err    error // the store's own error, for the logs
}

// Storage returns a *StorageError for err with the given reason.
func Storage(reason string, err error) *StorageError {
	return &StorageError{Reason: reason, Err: err}
}

func (e *StorageError) Error() string {
	return "the store cannot take writes: " + e.Reason + ": " + e.Err.Error()
}

// Detail is what a client is told: the reason, without the store's own
// error text.
func (e *StorageError) Detail() string {
	return "the store cannot take writes now (" + e.Reason + "); retry later"
}

func (e *StorageError) Unwrap() error { return e.Err }

// Is makes a StorageError match ErrUnavailable.
func (e *StorageError) Is(target error) bool { return target == ErrUnavailable }
