package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/quota"
)

// Quotas keeps the counters of the tenants' quotas (quota.Backend) in
// the tables of migration 0004, so that every replica sharing the
// database applies the same limits. Times are the database's clock.
type Quotas struct {
	s       *Store
	replica string
	ttl     time.Duration
}

var _ quota.Backend = (*Quotas)(nil)

// Quotas returns the quota backend of this store for the replica named
// replica, whose run counts expire runsTTL after it last wrote them.
func (s *Store) Quotas(replica string, runsTTL time.Duration) *Quotas {
	return &Quotas{s: s, replica: replica, ttl: runsTTL}
}

// Take implements quota.Backend: the bucket's row is locked while it is
// counted, so concurrent takes see each other.
func (q *Quotas) Take(ctx context.Context, key string, rate float64, burst int, n int) (quota.Bucket, error) {
	var b quota.Bucket
	err := q.s.inTx(ctx, func(tx pgx.Tx) error {
		var tokens float64
		var at, now int64
		err := tx.QueryRow(ctx, `INSERT INTO quota_buckets AS b (key, tokens, at, full_at)
			VALUES ($1, $2, kerneld_now_us(), kerneld_now_us())
			ON CONFLICT (key) DO UPDATE SET key = b.key
			RETURNING b.tokens, b.at, kerneld_now_us()`, key, float64(burst)).Scan(&tokens, &at, &now)
		if err != nil {
			return err
		}
		elapsed := math.Max(0, float64(now-at)/1e6)
		tokens = math.Min(float64(burst), tokens+elapsed*rate)
		b.Allowed = float64(n) <= tokens
		if b.Allowed {
			tokens = math.Min(float64(burst), tokens-float64(n))
		}
		b.Tokens = tokens
		if n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE quota_buckets SET tokens = $2, at = $3, full_at = $4 WHERE key = $1`,
			key, tokens, now, fullAt(now, tokens, rate, burst))
		return err
	})
	if err != nil {
		return quota.Bucket{}, fmt.Errorf("quota bucket: %w", err)
	}
	return b, nil
}

// fullAt is when a bucket holding tokens at now is full again, refilling
// at rate units per second up to burst: never, at rate 0.
func fullAt(now int64, tokens, rate float64, burst int) int64 {
	missing := float64(burst) - tokens
	switch {
	case missing <= 0:
		return now
	case rate <= 0:
		return math.MaxInt64
	}
	return now + int64(math.Min(math.Ceil(missing/rate*1e6), float64(math.MaxInt64-now)))
}

// Add implements quota.Backend. Every add renews the expiry, as on Redis.
func (q *Quotas) Add(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error) {
	var v int64
	err := q.s.pool.QueryRow(ctx, `INSERT INTO quota_counters AS c (key, value, expires_at)
		VALUES ($1, $2, kerneld_now_us() + $3)
		ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at,
			value = CASE WHEN c.expires_at <= kerneld_now_us() THEN excluded.value ELSE c.value + excluded.value END
		RETURNING value`, key, n, ttl.Microseconds()).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("quota counter: %w", unavailable(ctx, err))
	}
	return v, nil
}

// Runs implements quota.Backend. A transaction-scoped advisory lock on
// the tenant makes replicas' checks take turns, so two cannot both take
// the last place.
func (q *Quotas) Runs(ctx context.Context, tenant string, local, limit int) (int, bool, error) {
	var total int
	var ok bool
	err := q.s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "kerneld quota runs "+tenant); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM quota_runs WHERE tenant = $1 AND expires_at <= kerneld_now_us()`, tenant); err != nil {
			return err
		}
		var others int
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(runs), 0) FROM quota_runs WHERE tenant = $1 AND replica <> $2`,
			tenant, q.replica).Scan(&others); err != nil {
			return err
		}
		if limit > 0 && others+local > limit {
			total, ok = others+local-1, false
			return nil
		}
		total, ok = others+local, true
		if local <= 0 {
			_, err := tx.Exec(ctx, `DELETE FROM quota_runs WHERE tenant = $1 AND replica = $2`, tenant, q.replica)
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO quota_runs (tenant, replica, runs, expires_at)
			VALUES ($1, $2, $3, kerneld_now_us() + $4)
			ON CONFLICT (tenant, replica) DO UPDATE SET runs = excluded.runs, expires_at = excluded.expires_at`,
			tenant, q.replica, local, q.ttl.Microseconds())
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("quota runs: %w", err)
	}
	return total, ok, nil
}

// Lock implements quota.Backend with a row holding a token only its
// holder knows, taken when there is none or it expired; unlock deletes it
// only while it is still theirs. A waiter polls, from 1 ms up to every
// 20 ms: the holder keeps it for a count and an insert.
func (q *Quotas) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	token := uuid.NewString()
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		tag, err := q.s.pool.Exec(ctx, `INSERT INTO quota_locks AS l (key, token, expires_at)
			VALUES ($1, $2, kerneld_now_us() + $3)
			ON CONFLICT (key) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
			WHERE l.expires_at <= kerneld_now_us()`, key, token, ttl.Microseconds())
		if err != nil {
			return nil, fmt.Errorf("quota lock: %w", unavailable(ctx, err))
		}
		if tag.RowsAffected() == 1 {
			return func() {
				// Best effort: a lock not deleted expires after ttl.
				_, _ = q.s.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM quota_locks WHERE key = $1 AND token = $2`, key, token)
			}, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// QuotaPruneEvery is how often a store drops the quota rows that no
// longer count (PruneQuotas).
const QuotaPruneEvery = time.Minute

// pruneQuotasSQL drops the quota rows that read as missing ones do:
// counters and run counts past their expiry, locks past theirs (held by a
// process that died, or never deleted), and buckets full again. Without
// it every key ever used (a tenant's day, a replica's name) would keep a
// row for ever.
const pruneQuotasSQL = `WITH c AS (
	DELETE FROM quota_counters WHERE expires_at <= kerneld_now_us() RETURNING 1
), r AS (
	DELETE FROM quota_runs WHERE expires_at <= kerneld_now_us() RETURNING 1
), l AS (
	DELETE FROM quota_locks WHERE expires_at <= kerneld_now_us() RETURNING 1
), b AS (
	DELETE FROM quota_buckets WHERE full_at <= kerneld_now_us() RETURNING 1
)
SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM r) + (SELECT count(*) FROM l) + (SELECT count(*) FROM b)`

// PruneQuotas drops the quota rows that no longer count and returns how
// many it dropped. Every replica's store does it every QuotaPruneEvery; a
// row is dropped only in the state a missing row reads as, so a take or
// add racing it counts the same either way.
func (s *Store) PruneQuotas(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, pruneQuotasSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune quotas: %w", unavailable(ctx, err))
	}
	return n, nil
}

// pruneLoop runs PruneQuotas every QuotaPruneEvery until the store is
// closed.
func (s *Store) pruneLoop() {
	t := time.NewTicker(QuotaPruneEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), QuotaPruneEvery)
			if _, err := s.PruneQuotas(ctx); err != nil {
				s.log.Warn("prune quota rows", "err", err)
			}
			cancel()
		}
	}
}
