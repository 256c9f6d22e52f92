package errdefs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
)

func TestError(t *testing.T) {
	err := fmt.Errorf("start run: %w", errdefs.New(errdefs.ErrConflict, "session_busy", "session %s is busy", "s1").With("active_run_id", "r1"))
	if !errors.Is(err, errdefs.ErrConflict) || errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("kind of %v is not exactly ErrConflict", err)
	}
	if got := errdefs.CodeOf(err); got != "session_busy" {
		t.Errorf("CodeOf = %q, want session_busy", got)
	}
	e, _ := errors.AsType[*errdefs.Error](err)
	if e.Extra["active_run_id"] != "r1" || e.Error() != "session s1 is busy" {
		t.Errorf("error = %q %v", e.Error(), e.Extra)
	}
	if got := errdefs.CodeOf(errors.New("plain")); got != "" {
		t.Errorf("CodeOf(plain) = %q, want empty", got)
	}
}

func TestValidationError(t *testing.T) {
	var v *errdefs.ValidationError
	if v.Err() != nil {
		t.Fatal("an empty validation is not an error")
	}
	v = v.Add("name", "too long").Add("agent", "required")
	err := v.Err()
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("%v is not ErrInvalid", err)
	}
	if got, want := err.Error(), "invalid agent: required; name: too long"; got != want {
		t.Errorf("Error() = %q, want %q (fields sorted)", got, want)
	}
	if p := errdefs.Invalid("limit", "too big").Problems; p["limit"] != "too big" || len(p) != 1 {
		t.Errorf("Invalid problems = %v", p)
	}
}

func TestStorageError(t *testing.T) {
	cause := errors.New("database or disk is full (13)")
	err := fmt.Errorf("append events: %w", errdefs.Storage("the disk is full", cause))
	if !errors.Is(err, errdefs.ErrUnavailable) || !errors.Is(err, cause) {
		t.Errorf("%v does not match ErrUnavailable and its cause", err)
	}
	se, ok := errors.AsType[*errdefs.StorageError](err)
	if !ok {
		t.Fatalf("%v holds no StorageError", err)
	}
	if got, want := se.Detail(), "the store cannot take writes now (the disk is full); retry later"; got != want {
		t.Errorf("Detail() = %q, want %q (no store error text)", got, want)
	}
}
