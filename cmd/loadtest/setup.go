package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// setup is what serves one column of workloads: a store, and how many
// replicas share it. Only the redis and postgres stores are shared, so
// the memory and sqlite stores always run one.
type setup struct {
	store    string
	replicas int
}

// String labels the setup's rows: "sqlite", or "redis ×3".
func (s setup) String() string {
	if !shared(s.store) {
		return s.store
	}
	return fmt.Sprintf("%s ×%d", s.store, s.replicas)
}

// shared reports whether several replicas can share store.
func shared(store string) bool { return store == "redis" || store == "postgres" }

// parseSetups reads -stores and -replicas: every store once, and the
// shared stores once per replica count.
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
		case "redis", "postgres":
			for _, n := range counts {
				out = append(out, setup{store: s, replicas: n})
			}
		default:
			return nil, fmt.Errorf("-stores: unknown store %q (memory, sqlite, redis, postgres)", s)
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

// createDatabase creates a database of the workload's own on the
// Postgres server at base and returns its URL.
func createDatabase(ctx context.Context, base, name string) (string, error) {
	if err := pgExec(ctx, base, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops what createDatabase created, and the workload's data
// with it.
func dropDatabase(ctx context.Context, base, name string) error {
	return pgExec(ctx, base, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
}

func pgExec(ctx context.Context, u, sql string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }() // the statement's outcome is what counts
	_, err = conn.Exec(ctx, sql)
	return err
}
