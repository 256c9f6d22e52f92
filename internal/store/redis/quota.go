package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/kerneld/kerneld/internal/quota"
)

// Quotas keeps the counters of the tenants' quotas (quota.Backend) in
// Redis, so that every replica sharing the store applies the same limits.
// Its keys, beside the store's:
//
//	P quota:req:<tenant>, P quota:runs:<tenant>  hash: a token bucket
//	                        (tokens, at), expiring once it would be full
//	P quota:tokens:<day>:<tenant>  counter of the day's model tokens
//	P quota:active:<tenant>  hash: replica → "<runs> <expires ms>"
//	P quota:lock:sessions:<tenant>  string: the token of the replica
//	                        admitting a session of tenant (see Lock)
//
// Buckets and run counts use the server's clock (TIME), so replicas whose
// clocks differ still agree. One check is one round trip.
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

func (q *Quotas) key(k string) string { return q.s.prefix + "quota:" + k }

// Take implements quota.Backend.
func (q *Quotas) Take(ctx context.Context, key string, rate float64, burst int, n int) (quota.Bucket, error) {
	res, err := scriptQuotaTake.Run(ctx, q.s.rdb, []string{q.key(key)},
		strconv.FormatFloat(rate, 'g', -1, 64), burst, n).Slice()
	if err != nil {
		return quota.Bucket{}, fmt.Errorf("quota bucket: %w", err)
	}
	allowed, _ := res[0].(int64)
	text, _ := res[1].(string)
	tokens, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return quota.Bucket{}, fmt.Errorf("quota bucket: tokens %q: %w", text, err)
	}
	return quota.Bucket{Allowed: allowed == 1, Tokens: tokens}, nil
}

// Add implements quota.Backend.
func (q *Quotas) Add(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error) {
	pipe := q.s.rdb.TxPipeline()
	v := pipe.IncrBy(ctx, q.key(key), n)
	pipe.PExpire(ctx, q.key(key), ttl) // renewed on every add: the day's key outlives the day
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("quota counter: %w", err)
	}
	return v.Val(), nil
}

// Runs implements quota.Backend.
func (q *Quotas) Runs(ctx context.Context, tenant string, local, limit int) (int, bool, error) {
	res, err := scriptQuotaRuns.Run(ctx, q.s.rdb, []string{q.key("active:" + tenant)},
		q.replica, local, limit, q.ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("quota runs: %w", err)
	}
	return int(res[1]), res[0] == 1, nil
}

// Lock implements quota.Backend with SET NX PX and a token only its
// holder knows, which unlock checks before it deletes the key (a lock
// that expired and was taken by another is not theirs to free). A
// waiter polls, from 1 ms up to every 20 ms: the holder keeps it for a
// count and an insert, a few round trips.
func (q *Quotas) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	k, token := q.key("lock:"+key), uuid.NewString()
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		ok, err := q.s.rdb.SetNX(ctx, k, token, ttl).Result()
		if err != nil {
			return nil, fmt.Errorf("quota lock: %w", err)
		}
		if ok {
			return func() {
				// Best effort: a lock not deleted expires after ttl.
				_ = scriptQuotaUnlock.Run(context.WithoutCancel(ctx), q.s.rdb, []string{k}, token).Err()
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
