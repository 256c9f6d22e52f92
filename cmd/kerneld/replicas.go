package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/redis"
)

// replication is what a replica sharing a store (Redis or Postgres) runs
// beside its kernel: the signals it receives from the other replicas, and
// the tails of the sessions its clients watch, whose events other
// replicas append.
type replication struct {
	signals  kernel.Signals
	loops    []replicationLoop
	leaseTTL time.Duration
	kernel   *kernel.Kernel // set by start, before any signal is received
	log      *slog.Logger
	stop     context.CancelFunc
	wg       sync.WaitGroup // the loops' Run
}

// replicationLoop is a background loop of replication: it runs until its
// context ends or Close is called.
type replicationLoop interface {
	Run(ctx context.Context) error
	Close() error
}

// replicate prepares replication over db if several replicas can share
// it, and returns nil if they cannot.
func replicate(ctx context.Context, db store, c StoreConfig, streams *httpapi.Streams, log *slog.Logger) (*replication, error) {
	switch db := db.(type) {
	case *redis.Store:
		return replicateRedis(ctx, db, c.Redis.LeaseTTL, streams, log)
	case *postgres.Store:
		return replicatePostgres(db, c.Postgres.LeaseTTL, streams, log), nil
	}
	return nil, nil
}

// replicateRedis is replication over Redis: signals over Pub/Sub, tails
// over XREAD. It warns when Redis would lose acknowledged events in a
// restart.
func replicateRedis(ctx context.Context, db *redis.Store, ttl time.Duration, streams *httpapi.Streams, log *slog.Logger) (*replication, error) {
	if warning := db.PersistenceWarning(ctx); warning != "" {
		log.Warn("acknowledged events may not survive a Redis restart", "err", errors.New(warning))
	}
	r := &replication{log: log, leaseTTL: ttl}
	signals := db.NewSignals(r.receive)
	tailer, err := db.NewTailer(streams.ObserveEvents)
	if err != nil {
		return nil, err
	}
	r.signals, r.loops = signals, []replicationLoop{signals, tailer}
	streams.Follow(tailer)
	return r, nil
}

// replicatePostgres is replication over Postgres: signals and tails both
// over LISTEN/NOTIFY on one connection.
func replicatePostgres(db *postgres.Store, ttl time.Duration, streams *httpapi.Streams, log *slog.Logger) *replication {
	r := &replication{log: log, leaseTTL: ttl}
	listener := db.NewListener(r.receive, streams.ObserveEvents)
	r.signals, r.loops = listener, []replicationLoop{listener}
	streams.Follow(listener)
	return r
}

// config is the kernel's side of replication.
func (r *replication) config(replica string) kernel.Replication {
	return kernel.Replication{Replica: replica, Signals: r.signals, LeaseTTL: r.leaseTTL}
}

// start delivers the signals other replicas send to k, and tails the
// sessions the hub follows, until close.
func (r *replication) start(k *kernel.Kernel) {
	r.kernel = k
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	for _, loop := range r.loops {
		r.wg.Go(func() {
			if err := loop.Run(ctx); err != nil {
				r.log.Error("replication stopped", "err", err)
			}
		})
	}
}

func (r *replication) receive(sig session.Signal) { r.kernel.Receive(sig) }

// close stops the loops and waits for them.
func (r *replication) close() error {
	if r.stop != nil {
		r.stop()
	}
	r.wg.Wait()
	errs := make([]error, 0, len(r.loops))
	for _, loop := range r.loops {
		errs = append(errs, loop.Close())
	}
	return errors.Join(errs...)
}
