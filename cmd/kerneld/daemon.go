package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/feed"
	"github.com/kerneld/kerneld/internal/guard"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/anthropic"
	"github.com/kerneld/kerneld/internal/llm/openai"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/metrics"
	"github.com/kerneld/kerneld/internal/quota"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/telemetry"
	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
	"github.com/kerneld/kerneld/internal/webhook"
)

// store is a kernel store the daemon owns and closes last.
type store interface {
	kernel.Store
	Close() error
}

// daemon is kerneld wired together.
type daemon struct {
	log      *slog.Logger
	metrics  *metrics.Metrics
	registry *agents.Registry
	tools    *tools.Registry
	db       store
	streams  *httpapi.Streams
	kernel   *kernel.Kernel
	handler  *httpapi.Server
	conns    connPlan
	repl     *replication // with a store replicas share
	quotas   *quota.Limiter
	tracing  *telemetry.Tracing
	targets  *webhook.Targets
	webhooks *webhook.Dispatcher // nil when the store keeps no outbox
	// schedules fires the sessions' scheduled prompts; nil with a store
	// that keeps none.
	schedules *schedule.Service
	// feed keeps the tenants' session feeds; nil with a store without one.
	feed *feed.Service
}

// serve runs kerneld until ctx ends. It listens first and answers health
// checks while the store opens, migrates and recovers; then it serves the
// API. A bad agent file or a busy port fails before anything is served.
func serve(ctx context.Context, cfg Config, getenv func(string) string, log *slog.Logger, tracing *telemetry.Tracing) error {
	d := &daemon{log: log, metrics: metrics.New(), tools: tools.NewRegistry(tools.Builtins()...), tracing: tracing}
	enableTestFaults(getenv, log)
	var err error
	if d.targets, err = cfg.Webhooks.targets(); err != nil {
		return err
	}
	if err := d.loadAgents(cfg, getenv); err != nil {
		return err
	}
	var handler switchHandler
	handler.set(httpapi.Starting(version))
	serveErr := make(chan error, 2)
	srv, err := d.serveAPI(ctx, cfg, &handler, serveErr)
	if err != nil {
		return err
	}
	servers := []*http.Server{srv}
	if cfg.HTTP.MetricsAddr != "" {
		msrv, err := d.serveMetrics(ctx, cfg, serveErr)
		if err != nil {
			return errors.Join(err, srv.Close())
		}
		servers = append(servers, msrv)
	}

	if err := d.open(ctx, cfg); err != nil {
		return errors.Join(err, closeAll(servers))
	}
	srv.RegisterOnShutdown(d.handler.CloseStreams) // else Shutdown waits on open SSE streams
	handler.set(d.handler)
	log.Info("kerneld ready")
	return d.run(ctx, servers, serveErr, cfg.HTTP.ShutdownTimeout)
}

// testFaultsEnv turns on the scripted model's crash faults when set to
// "crash": a test of what survives a kill can then have a model call end
// the process (crash_after_tokens) every time a run reaches it. It is an
// environment variable, not a config key, so that no config file a daemon
// is deployed with can turn it on.
const testFaultsEnv = "KERNELD_TEST_FAULTS"

// enableTestFaults turns the test faults on if the environment asks.
func enableTestFaults(getenv func(string) string, log *slog.Logger) {
	if getenv(testFaultsEnv) != "crash" {
		return
	}
	log.Warn("test faults are on: a scripted agent with crash_after_tokens ends this process", "env", testFaultsEnv)
	scripted.EnableCrashFaults(func() {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill() // SIGKILL: nothing runs after it, as with kill -9
		}
		select {} // until the signal lands
	})
}

// serveAPI listens on http.addr and serves handler there under the
// connection limits, which it derives from the descriptor limit.
func (d *daemon) serveAPI(ctx context.Context, cfg Config, handler http.Handler, serveErr chan<- error) (*http.Server, error) {
	fileLimit, limitErr := raiseFileLimit()
	d.conns = planConnections(cfg.HTTP, fileLimit)
	logConnectionPlan(d.log, cfg.HTTP, d.conns, limitErr)
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTP.Addr)
	if err != nil {
		return nil, err
	}
	d.log.Info("kerneld listening", append([]any{"addr", ln.Addr().String(), "version", version, "store", cfg.Store.Kind,
		"agents", len(d.registry.List())}, d.tracing.Describe()...)...)
	proxies, _ := httpapi.ParseTrustedProxies(cfg.HTTP.TrustedProxies) // Validate parsed them
	conns := httpapi.NewConnLimit(httpapi.ConnLimitOptions{Max: d.conns.maxConns, MaxRefusing: d.conns.maxRefusing,
		MaxPerAddress: cfg.HTTP.MaxConnectionsPerAddress, TrustedProxies: proxies,
		FirstRequestTimeout: cfg.HTTP.FirstRequestTimeout, Logger: d.log.With("system", "http")})
	d.metrics.GaugeFunc("kerneld_connections_open", "Open connections to the API, idle keep-alive ones included.",
		func() float64 { return float64(conns.Open()) })
	d.metrics.GaugeFunc("kerneld_connections_idle", "Open connections idle between requests (keep-alive).",
		func() float64 { return float64(conns.Idle()) })
	d.metrics.CounterFunc("kerneld_connections_refused_total",
		"Connections refused over http.max_connections or http.max_connections_per_address (and requests a trusted proxy forwarded over the latter).",
		func() float64 { return float64(conns.Refused()) })
	d.metrics.CounterFunc("kerneld_connections_reclaimed_total",
		"Idle keep-alive connections closed at a connection cap to serve a new connection.",
		func() float64 { return float64(conns.Reclaimed()) })
	srv := d.httpServer(cfg.HTTP, conns, handler)
	go func() { serveErr <- srv.Serve(conns.Listener(ln)) }()
	return srv, nil
}

// serveMetrics serves /metrics alone on http.metrics_addr, so that the
// API's listener need not serve every tenant's counters.
func (d *daemon) serveMetrics(ctx context.Context, cfg Config, serveErr chan<- error) (*http.Server, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTP.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics: %w", err)
	}
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	conns := httpapi.NewConnLimit(httpapi.ConnLimitOptions{Max: metricsMaxConns, MaxRefusing: metricsMaxConns / 2,
		FirstRequestTimeout: cfg.HTTP.FirstRequestTimeout, Logger: d.log.With("system", "http")})
	srv := d.httpServer(cfg.HTTP, conns, httpapi.MetricsHandler(httpapi.Options{
		Logger: d.log.With("system", "http"), AdminKeys: cfg.Auth.AdminKeys, Metrics: d.metrics.Handler(), Version: version,
	}))
	go func() { serveErr <- srv.Serve(conns.Listener(ln)) }()
	return srv, nil
}

// httpServer returns a server for h with the connection limits: how long
// a client may take over its headers, its request and between requests,
// and how many connections it may hold.
func (d *daemon) httpServer(c HTTPConfig, conns *httpapi.ConnLimit, h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout, IdleTimeout: c.IdleTimeout,
		ErrorLog: slog.NewLogLogger(d.log.With("system", "http").Handler(), slog.LevelWarn),
	}
	conns.Install(srv)
	return srv
}

// closeAll closes servers at once, for a startup that failed.
func closeAll(servers []*http.Server) error {
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Close())
	}
	return errors.Join(errs...)
}

// loadAgents reads the agent definitions.
func (d *daemon) loadAgents(cfg Config, getenv func(string) string) error {
	registry, err := agents.Load(cfg.AgentsDir, agents.Options{
		Providers: map[string]llm.Factory{
			"scripted":  d.metrics.Provider("scripted", scripted.New),
			"openai":    d.metrics.Provider("openai", openai.New),
			"anthropic": d.metrics.Provider("anthropic", anthropic.New),
		},
		KnownTool: func(name string) bool { return d.tools.Has(name) || name == kernel.SpawnAgentTool },
		Getenv:    getenv,
		CheckGuard: func(g agents.GuardSpec) error {
			_, err := guard.New(guardConfig(g), d.targets.Policy())
			return err
		},
		CheckWebhook: func(w agents.WebhookSpec) error {
			return d.targets.CheckEndpoint(webhook.Endpoint{URL: w.URL, Events: w.Events})
		},
	})
	if err != nil {
		return fmt.Errorf("load agents: %w", err)
	}
	d.registry = registry
	return nil
}

// guardConfig is an agent file's guard as the guard package takes it.
func guardConfig(g agents.GuardSpec) guard.Config {
	return guard.Config{URL: g.URL, Secret: g.Secret, Timeout: g.Timeout, OnFailure: g.OnFailure, BeforeRun: g.BeforeRun}
}

// open opens the store, builds the kernel and the API, and recovers the
// runs a crash left running.
func (d *daemon) open(ctx context.Context, cfg Config) error {
	db, err := openStore(ctx, cfg.Store, d.log.With("system", "store"))
	if err != nil {
		return err
	}
	d.db = db
	d.streams = httpapi.NewStreams(d.log.With("system", "http"), httpapi.StreamOptions{Heartbeat: cfg.HTTP.Heartbeat})
	if cfg.Store.Redis.Replica == "" {
		cfg.Store.Redis.Replica = replicaName() // one name for the leases and the quota counts
	}
	d.quotas = newQuotas(cfg, db)
	d.webhooks = cfg.Webhooks.dispatcher(db, d.targets, cfg.Store.Redis.Replica, d.log.With("system", "webhook"))
	var repl kernel.Replication
	if d.repl, err = replicate(ctx, db, cfg.Store, d.streams, d.log.With("system", "store")); err != nil {
		return errors.Join(err, d.close(ctx))
	}
	if d.repl != nil {
		repl = d.repl.config(cfg.Store.Redis.Replica)
	}
	observers := []kernel.Observer{d.streams, d.metrics, kernel.LogObserver{Log: d.log.With("system", "kernel")}}
	runner := &kernelRunner{}
	if d.schedules, err = newSchedules(cfg, db, runner, d.log.With("system", "schedules")); err != nil {
		return errors.Join(err, d.close(ctx))
	}
	if d.schedules != nil {
		observers = append(observers, d.schedules) // a session closed or deleted loses its schedules
	}
	var feedSink kernel.FeedSink
	if log, ok := db.(feed.Log); ok {
		d.feed = feed.New(feed.Options{Log: log, Logger: d.log.With("system", "feed")})
		observers, feedSink = append(observers, d.feed), d.feed
	}
	imgs := newImages(cfg, db) // the kernel keeps and loads them; the API checks and serves them
	d.kernel, err = kernel.New(kernel.Config{
		Agents: d.registry, Tools: d.tools, Store: d.metrics.Store(db),
		Limits: cfg.limits(), Retention: cfg.retention(), Replication: repl, Quotas: d.quotas,
		StallAfter: cfg.Sessions.StallAfter,
		Titles:     kernel.Titles(cfg.Sessions.Titles),
		Feed:       feedSink,
		Announcer:  d.announcer(db),
		Guards:     newGuards(d.targets.Policy()),
		Tracing:    d.tracing,
		Observers:  observers,
		Logger:     d.log.With("system", "kernel"),
		MCP:        mcp.Options{Logger: d.log}, // it adds system=mcp
		SessionMCP: cfg.MCP.sessionMCP(),
		Images:     imgs,
	})
	if err == nil && d.repl != nil {
		d.repl.start(d.kernel)
	}
	if err == nil && d.feed != nil {
		d.feed.Start(d.kernel.FeedSummary)
	}
	if err == nil && d.webhooks != nil {
		d.webhooks.Start()
		d.measureWebhooks()
	}
	if err == nil {
		if _, err = d.kernel.Recover(ctx); err != nil {
			err = d.recoverError(cfg.Store, err)
		}
	}
	if err != nil {
		return errors.Join(err, d.close(ctx))
	}
	runner.kernel = d.kernel
	if d.schedules != nil {
		d.schedules.Start() // after recovery: a firing's run queues behind the runs recovered
	}
	d.measureOwnership()
	d.metrics.GaugeFunc("kerneld_streams_open", "Open SSE streams.", func() float64 { return float64(d.streams.Open()) })
	d.metrics.GaugeFunc("kerneld_stream_buffer_bytes", "Encoded frames held for open SSE streams.",
		func() float64 { return float64(d.streams.Buffered()) })
	var metrics http.Handler
	if cfg.HTTP.MetricsAddr == "" {
		metrics = d.metrics.Handler()
	}
	d.handler = httpapi.New(d.kernel, d.streams, httpapi.Options{
		Logger: d.log.With("system", "http"), APIKeys: cfg.apiKeys(), AdminKeys: cfg.Auth.AdminKeys,
		UserHeader: cfg.Auth.UserHeader, MaxBodyBytes: cfg.HTTP.MaxBodyBytes, RequestTimeout: cfg.HTTP.RequestTimeout,
		ReadTimeout: cfg.HTTP.ReadTimeout, MinBodyRate: cfg.HTTP.MinBodyRate, BodyRateGrace: cfg.HTTP.BodyRateGrace,
		MaxStreams: d.conns.maxStreams, MaxStreamsPerTenant: cfg.HTTP.MaxStreamsPerTenant, Feed: d.feed,
		CORSOrigins: cfg.HTTP.CORSOrigins, Quotas: d.quotas, Metrics: metrics, OpenAPI: api.OpenAPI, Version: version,
		Tracing: d.tracing, Webhooks: d.webhooks,
		Images: imgs, MaxImageBodyBytes: cfg.Images.MaxRequestBytes, Schedules: d.schedules,
	})
	return nil
}

// announcer is where the kernel announces what webhooks deliver: the
// store's outbox; nil when the store keeps none, or when no secret is
// configured, since nothing could be signed (and a run's end then costs
// no reads for the announcement).
func (d *daemon) announcer(db store) kernel.Announcer {
	outbox, ok := db.(webhook.Outbox)
	if !ok || d.webhooks == nil || len(d.targets.Keys()) == 0 {
		return nil
	}
	return &webhook.Announcer{Targets: d.targets, Outbox: outbox, Dispatcher: d.webhooks}
}

// quotaRunsTTL is how long a replica's count of running runs stands in
// Redis unless written again (every quotaPublishEvery): the runs of a
// replica that stopped no longer count after it.
const (
	quotaRunsTTL      = 15 * time.Second
	quotaPublishEvery = 5 * time.Second
)

// newQuotas returns the tenants' quotas, their counters in Redis with the
// redis store (under its prefix) and in this process otherwise. It names
// this replica, for the Redis counts, if the config does not.
func newQuotas(cfg Config, db store) *quota.Limiter {
	opts := quota.Options{Limits: quota.Limits(cfg.Quotas), PublishEvery: quotaPublishEvery}
	switch shared := db.(type) {
	case *redis.Store:
		opts.Backend = shared.Quotas(cfg.Store.Redis.Replica, quotaRunsTTL)
	case *postgres.Store:
		opts.Backend = shared.Quotas(cfg.Store.Redis.Replica, quotaRunsTTL)
	}
	return quota.New(opts)
}

// replicaName is this replica's name when the config gives none:
// host-pid-random, as the kernel would pick.
func replicaName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), session.NewMessageID()[:6])
}

// measureOwnership exposes what this replica owns: the runs it executes,
// the leases it holds, the sessions it took over and the appends refused
// because a lease was lost.
func (d *daemon) measureOwnership() {
	stat := func(f func(kernel.Stats) float64) func() float64 {
		return func() float64 { return f(d.kernel.Stats()) }
	}
	d.metrics.GaugeFunc("kerneld_runs_active", "Runs this replica is executing or holding for an approval.",
		stat(func(s kernel.Stats) float64 { return float64(s.ActiveRuns) }))
	d.metrics.GaugeFunc("kerneld_leases_held", "Sessions whose lease this replica holds.",
		stat(func(s kernel.Stats) float64 { return float64(s.Leases) }))
	d.metrics.CounterFunc("kerneld_takeovers_total", "Sessions this replica took over from one that stopped.",
		stat(func(s kernel.Stats) float64 { return float64(s.TakeOvers) }))
	d.metrics.CounterFunc("kerneld_fenced_writes_total", "Appends the store refused because this replica's lease was lost.",
		stat(func(s kernel.Stats) float64 { return float64(s.Fenced) }))
}

// measureWebhooks counts this replica's webhook attempts by outcome.
func (d *daemon) measureWebhooks() {
	st := d.webhooks.Stats()
	for outcome, n := range map[string]*atomic.Int64{"delivered": &st.Delivered, "retried": &st.Retried, "failed": &st.Failed} {
		d.metrics.CounterFunc("kerneld_webhook_"+outcome+"_total", "Webhook attempts of this replica that ended "+outcome+".",
			func() float64 { return float64(n.Load()) })
	}
}

// openStore opens the configured backend. sqlite.Open names the database
// file in every error it returns.
func openStore(ctx context.Context, c StoreConfig, log *slog.Logger) (store, error) {
	switch c.Kind {
	case "memory":
		return memory.New(), nil
	case "redis":
		db, err := redis.Open(ctx, redis.Options{URL: c.Redis.URL, Prefix: c.Redis.Prefix, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		return db, nil
	case "postgres":
		db, err := postgres.Open(ctx, postgres.Options{URL: c.Postgres.URL, MaxConns: c.Postgres.MaxConns,
			StatementTimeout: c.Postgres.StatementTimeout, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		return db, nil
	}
	db, err := sqlite.Open(ctx, sqlite.Options{Path: databasePath(c), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return db, nil
}

// databasePath is the SQLite store's file.
func databasePath(c StoreConfig) string { return filepath.Join(c.DataDir, "kerneld.db") }

// recoverError names the store in an error of startup recovery, which
// stops kerneld: the operator must learn which file it is about, and, if
// SQLite found it damaged, that it is.
func (d *daemon) recoverError(c StoreConfig, err error) error {
	db, ok := d.db.(*sqlite.Store)
	if !ok {
		return fmt.Errorf("recover runs in the %s store: %w", c.Kind, err)
	}
	return fmt.Errorf("recover runs in %s: %w", databasePath(c), db.Diagnose(err))
}

// run serves until ctx ends, reloading agents on SIGHUP, then shuts down
// in order, within shutdownTimeout: streams and HTTP first, then runs
// (drained to their next step boundary and handed off: see close), then
// the store.
func (d *daemon) run(ctx context.Context, servers []*http.Server, serveErr chan error, shutdownTimeout time.Duration) error {
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() { defer close(reloaded); d.reloadOnHangup(reloadCtx) }()

	var err error
	select {
	case err = <-serveErr:
	case <-ctx.Done():
		d.log.Info("shutting down")
	}
	stopReload()
	<-reloaded
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := []error{err}
	if errors.Is(err, http.ErrServerClosed) {
		errs[0] = nil
	}
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(shutdownCtx)) // 1. stop taking requests, end streams
	}
	return errors.Join(append(errs, d.close(shutdownCtx))...)
}

// close stops the kernel and then the store. The runs are drained first:
// each is brought to its next step boundary and handed off, for another
// replica (signalled at once) or the next start to continue, until
// handoffGrace before ctx's deadline; then those still mid-step are cut
// and handed off as they are.
func (d *daemon) close(ctx context.Context) error {
	var errs []error
	if d.schedules != nil {
		errs = append(errs, d.schedules.Close(ctx)) // 2. no more firings; one cut short fires again
	}
	if d.kernel != nil {
		if deadline, ok := ctx.Deadline(); ok { // a startup that failed has no time to drain
			drainCtx, cancel := context.WithDeadline(ctx, deadline.Add(-handoffGrace(time.Until(deadline))))
			if err := d.kernel.Drain(drainCtx); err != nil {
				d.log.Warn("runs still mid-step at the end of the drain are handed off where they are", "err", err)
			}
			cancel()
		}
		errs = append(errs, d.kernel.Close(ctx)) // 3. runs leave; leases are released
	}
	if d.feed != nil {
		errs = append(errs, d.feed.Close(ctx)) // what the runs changed is in the feed
	}
	if d.streams != nil {
		d.streams.Close()
	}
	if d.repl != nil {
		errs = append(errs, d.repl.close()) // no more signals or tails
	}
	if d.webhooks != nil {
		errs = append(errs, d.webhooks.Close(ctx)) // attempts cut short are due again at once, for the next start
	}
	d.quotas.Close() // no more run counts to publish
	if d.db != nil {
		errs = append(errs, d.db.Close()) // 4. nothing writes any more
	}
	return errors.Join(errs...)
}

// handoffGrace is the part of a shutdown budget kept, after the drain,
// for cutting the runs still mid-step and handing them off: a tenth of
// it, at most a second.
func handoffGrace(budget time.Duration) time.Duration {
	return min(max(budget, 0)/10, time.Second)
}

// reloadOnHangup reloads the agent definitions on every SIGHUP until ctx
// ends, stopping the MCP servers no agent names any more. A bad reload
// keeps the agents already loaded.
func (d *daemon) reloadOnHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		stopped, err := d.kernel.ReloadAgents()
		if err != nil {
			d.log.Error("reload agents", "err", err)
			continue
		}
		d.log.Info("agents reloaded", "agents", len(d.registry.List()), "mcp_servers_stopped", stopped)
	}
}

// switchHandler serves whichever handler was set last, so kerneld can
// answer health checks before the API is ready.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}
