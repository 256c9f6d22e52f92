package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// setup is what serves one column of workloads: a store, and how many
// replicas share it. Only the redis store is shared, so the memory and
// sqlite stores always run one.
type setup struct {
	store    string
	replicas int
}

// String labels the setup's rows: "sqlite", or "redis ×3".
func (s setup) String() string {
	if s.store != "redis" {
		return s.store
	}
	return fmt.Sprintf("redis ×%d", s.replicas)
}

// parseSetups reads -stores and -replicas: every store once, and the redis
// store once per replica count.
func parseSetups(stores, replicas string) ([]setup, error) {
	var counts []int
	for _, r := range strings.Split(replicas, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("-replicas: %q is not a replica count from 1 to 16", r)
		}
		counts = append(counts, n)
	}
	var out []setup
	for _, s := range strings.Split(stores, ",") {
		switch s {
		case "memory", "sqlite":
			out = append(out, setup{store: s, replicas: 1})
		case "redis":
			for _, n := range counts {
				out = append(out, setup{store: s, replicas: n})
			}
		default:
			return nil, fmt.Errorf("-stores: unknown store %q (memory, sqlite, redis)", s)
		}
	}
	return out, nil
}

// deleteKeys removes every key under prefix from the Redis server at url:
// what a workload's replicas stored, so that rounds do not accumulate.
func deleteKeys(ctx context.Context, url, prefix string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }() // nothing left to flush
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == cap(batch) {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return rdb.Unlink(ctx, batch...).Err()
	}
	return nil
}
