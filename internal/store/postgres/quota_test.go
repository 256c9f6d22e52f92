package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/store/postgres"
)

// TestQuotas_Take: a bucket starts full, refuses what it does not hold
// and takes a unit given back.
func TestQuotas_Take(t *testing.T) {
	q := openStore(t).Quotas("a", time.Minute)
	take := func(n int) quota.Bucket {
		t.Helper()
		b, err := q.Take(t.Context(), "req:acme", 0.001, 2, n) // a unit back every 1000 s
		require.NoError(t, err)
		b.Tokens = float64(int(b.Tokens*100)) / 100 // what refilled between calls
		return b
	}
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 2}, take(0), "a new bucket is full; looking takes none")
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 1}, take(1))
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 0}, take(1))
	assert.Equal(t, quota.Bucket{Allowed: false, Tokens: 0}, take(1), "empty")
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 1}, take(-1), "given back")
}

// TestQuotas_Runs: replicas' run counts add up, a limit refuses what
// would pass it without recording it, and the count of a replica that
// stops writing it is dropped once its time-to-live passes.
func TestQuotas_Runs(t *testing.T) {
	st := openStore(t)
	a, b := st.Quotas("a", time.Minute), st.Quotas("b", 300*time.Millisecond)
	runs := func(q *postgres.Quotas, local, limit int) (int, bool) {
		t.Helper()
		n, ok, err := q.Runs(t.Context(), "acme", local, limit)
		require.NoError(t, err)
		return n, ok
	}
	n, ok := runs(a, 2, 0)
	assert.Equal(t, []any{2, true}, []any{n, ok})
	n, ok = runs(b, 1, 3)
	assert.Equal(t, []any{3, true}, []any{n, ok}, "b's one with a's two")
	n, ok = runs(b, 2, 3)
	assert.Equal(t, []any{3, false}, []any{n, ok}, "a fourth would pass the limit")
	n, _ = runs(a, 2, 0)
	assert.Equal(t, 3, n, "the refused run was not recorded")
	deadline := time.Now().Add(5 * time.Second)
	for n != 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n, _ = runs(a, 2, 0)
	}
	assert.Equal(t, 2, n, "b stopped writing: its run no longer counts")
	n, _ = runs(a, 0, 0)
	assert.Zero(t, n)
}

// TestQuotas_Add: a counter adds up; adding 0 reads it.
func TestQuotas_Add(t *testing.T) {
	q := openStore(t).Quotas("a", time.Minute)
	for _, step := range []struct{ add, want int64 }{{5, 5}, {0, 5}, {7, 12}} {
		n, err := q.Add(t.Context(), "tokens:2026-01-01:acme", step.add, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, step.want, n, "after adding %d", step.add)
	}
}

// TestQuotas_Lock: a second holder waits until the first unlocks, and a
// lock whose holder never unlocks goes once its time passes.
func TestQuotas_Lock(t *testing.T) {
	st := openStore(t)
	a, b := st.Quotas("a", time.Minute), st.Quotas("b", time.Minute)
	unlock, err := a.Lock(t.Context(), "sessions:acme", time.Minute)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = b.Lock(ctx, "sessions:acme", time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded, "held by a")
	unlock()
	unlockB, err := b.Lock(t.Context(), "sessions:acme", 200*time.Millisecond)
	require.NoError(t, err, "free once a unlocked")
	_ = unlockB // never called: the lock expires
	unlockA, err := a.Lock(t.Context(), "sessions:acme", time.Minute)
	require.NoError(t, err, "free once b's lock expired")
	unlockA()
}
