package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// TestQuotas_Take: a bucket in Redis starts full, refuses what it does
// not hold, takes a unit given back, and lives under the store's prefix.
func TestQuotas_Take(t *testing.T) {
	srv := redistest.Use(t)
	q := mustOpen(t, srv).Quotas("a", time.Minute)
	ctx := t.Context()
	take := func(n int) quota.Bucket {
		t.Helper()
		b, err := q.Take(ctx, "req:acme", 0.001, 2, n) // a unit back every 1000 s
		require.NoError(t, err)
		return b
	}
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 2}, roundTokens(take(0)), "a new bucket is full; looking takes none")
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 1}, roundTokens(take(1)))
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 0}, roundTokens(take(1)))
	assert.Equal(t, quota.Bucket{Allowed: false, Tokens: 0}, roundTokens(take(1)), "empty")
	assert.Equal(t, quota.Bucket{Allowed: true, Tokens: 1}, roundTokens(take(-1)), "given back")
	keys := srv.Keys(t)
	assert.Contains(t, keys, srv.Prefix+"quota:req:acme")
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, srv.Prefix), "key %s outside the prefix", k)
	}
}

// roundTokens drops what refilling added in the milliseconds between
// calls.
func roundTokens(b quota.Bucket) quota.Bucket {
	b.Tokens = float64(int(b.Tokens*100)) / 100
	return b
}

// TestQuotas_Runs: replicas' run counts add up, a limit refuses what
// would pass it without recording it, and the count of a replica that
// stops writing it is dropped once its time-to-live passes.
func TestQuotas_Runs(t *testing.T) {
	srv := redistest.Use(t)
	st := mustOpen(t, srv)
	a, b := st.Quotas("a", time.Minute), st.Quotas("b", 300*time.Millisecond)
	ctx := t.Context()
	runs := func(q interface {
		Runs(context.Context, string, int, int) (int, bool, error)
	}, local, limit int) (int, bool) {
		t.Helper()
		n, ok, err := q.Runs(ctx, "acme", local, limit)
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

// BenchmarkQuotas_Take is the per-request check with the counters in
// Redis: one script call, one round trip.
func BenchmarkQuotas_Take(b *testing.B) {
	q := openStore(b).Quotas("a", time.Minute)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := q.Take(ctx, "req:acme", 1e9, 1e9, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
