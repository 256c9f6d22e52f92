package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/errdefs"
)

func TestUnavailable(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reason string // "" when err must come back as it is
	}{
		{"disk full", &pgconn.PgError{Code: "53100"}, "disk is full"},
		{"too many connections", &pgconn.PgError{Code: "53300"}, "too many connections"},
		{"read-only", &pgconn.PgError{Code: "25006"}, "read-only"},
		{"shutting down", &pgconn.PgError{Code: "57P01"}, "shutting down"},
		{"connection failure", &pgconn.PgError{Code: "08006"}, "connection to Postgres failed"},
		{"wrapped", fmt.Errorf("create run: %w", &pgconn.PgError{Code: "53100"}), "disk is full"},
		{"unique violation", &pgconn.PgError{Code: "23505"}, ""},
		{"plain error", errors.New("bad"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unavailable(t.Context(), tt.err)
			se, ok := errors.AsType[*errdefs.StorageError](got)
			if tt.reason == "" {
				assert.False(t, ok, "unavailable(%v) = %v, want it as it is", tt.err, got)
				return
			}
			if assert.True(t, ok, "unavailable(%v) = %v, want a StorageError", tt.err, got) {
				assert.Contains(t, se.Reason, tt.reason)
			}
		})
	}
	t.Run("after the caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := &pgconn.PgError{Code: "08006"}
		assert.Equal(t, error(err), unavailable(ctx, err))
	})
}
