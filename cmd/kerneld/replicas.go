package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
)

// replication is what a replica sharing a Redis store runs beside its
// kernel: the signals it receives from the other replicas, and the tails
// of the sessions its clients watch, whose events other replicas append.
type replication struct {
	signals *redis.Signals
	tailer  *redis.Tailer
	kernel  *kernel.Kernel // set by start, before any signal is received
	log     *slog.Logger
	stop    context.CancelFunc
	wg      sync.WaitGroup // the Run loops of signals and tailer
}

// replicate prepares replication over db: the kernel's signals, and the
// tails that feed streams. It warns when Redis would lose acknowledged
// events in a restart.
func replicate(ctx context.Context, db *redis.Store, streams *httpapi.Streams, log *slog.Logger) (*replication, error) {
	if warning := db.PersistenceWarning(ctx); warning != "" {
		log.Warn("acknowledged events may not survive a Redis restart", "err", errors.New(warning))
	}
	r := &replication{log: log}
	r.signals = db.NewSignals(r.receive)
	tailer, err := db.NewTailer(streams.ObserveEvents)
	if err != nil {
		return nil, err
	}
	r.tailer = tailer
	streams.Follow(tailer)
	return r, nil
}

// config is the kernel's side of replication.
func (r *replication) config(c RedisConfig) kernel.Replication {
	return kernel.Replication{Replica: c.Replica, Signals: r.signals, LeaseTTL: c.LeaseTTL}
}

// start delivers the signals other replicas send to k, and tails the
// sessions the hub follows, until close.
func (r *replication) start(k *kernel.Kernel) {
	r.kernel = k
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	r.wg.Go(func() { r.run("signals", r.signals.Run, ctx) })
	r.wg.Go(func() { r.run("tailer", r.tailer.Run, ctx) })
}

func (r *replication) run(what string, loop func(context.Context) error, ctx context.Context) {
	if err := loop(ctx); err != nil {
		r.log.Error("replication stopped", "loop", what, "err", err)
	}
}

func (r *replication) receive(sig session.Signal) { r.kernel.Receive(sig) }

// close stops the loops and waits for them.
func (r *replication) close() error {
	if r.stop != nil {
		r.stop()
	}
	r.wg.Wait()
	return errors.Join(r.signals.Close(), r.tailer.Close())
}
