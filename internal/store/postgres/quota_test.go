package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
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

// TestPruneQuotas: the rows that read as missing ones (expired counters,
// run counts and locks, buckets full again) are dropped, the others kept,
// and the keys dropped count from the start again.
func TestPruneQuotas(t *testing.T) {
	u := pgtest.Schema(t)
	st := mustOpen(t, u)
	q := st.Quotas("a", time.Hour)
	ctx := t.Context()
	for _, key := range []string{"day:live", "day:gone"} {
		_, err := q.Add(ctx, key, 3, time.Hour)
		require.NoError(t, err)
	}
	_, err := q.Take(ctx, "req:full", 1000, 5, 0) // looked at: full
	require.NoError(t, err)
	_, err = q.Take(ctx, "req:used", 0.001, 5, 1) // full again in 1000 s
	require.NoError(t, err)
	_, _, err = q.Runs(ctx, "acme", 1, 0)
	require.NoError(t, err)
	for _, key := range []string{"lock:live", "lock:gone"} {
		_, err := q.Lock(ctx, key, time.Hour) // neither is unlocked
		require.NoError(t, err)
	}
	exec(t, u, `UPDATE quota_counters SET expires_at = 0 WHERE key = 'day:gone'`)
	exec(t, u, `UPDATE quota_locks SET expires_at = 0 WHERE key = 'lock:gone'`)
	exec(t, u, `UPDATE quota_runs SET expires_at = 0`)

	n, err := st.PruneQuotas(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), n, "pruned rows")
	var left string
	require.NoError(t, queryRow(t, u, `SELECT string_agg(key, ' ' ORDER BY key) FROM (
		SELECT key FROM quota_counters UNION ALL SELECT key FROM quota_buckets
		UNION ALL SELECT key FROM quota_locks UNION ALL SELECT tenant FROM quota_runs) AS k`, &left))
	assert.Equal(t, "day:live lock:live req:used", left)

	v, err := q.Add(ctx, "day:gone", 1, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, int64(1), v, "a pruned counter starts again")
	b, err := q.Take(ctx, "req:full", 0.001, 5, 1)
	require.NoError(t, err)
	assert.True(t, b.Allowed)
	assert.InDelta(t, 4, b.Tokens, 0.01, "a pruned bucket is full")
	n, err = st.PruneQuotas(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing more to prune")
}
