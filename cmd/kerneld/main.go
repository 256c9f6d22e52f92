// Command kerneld serves AI-agent sessions over HTTP with durable,
// resumable event streams. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kerneld/kerneld/api"
	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/metrics"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/tools"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kerneld:", err)
		os.Exit(1)
	}
}

// run is main with its dependencies passed in, so tests can call it. It
// serves until ctx ends or SIGINT/SIGTERM arrives, then shuts down.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			return printVersion(stdout)
		case "healthcheck":
			return healthcheck(ctx, args[1:], getenv, stderr)
		}
	}
	f, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.version {
		return printVersion(stdout)
	}
	cfg, err := loadConfig(f, getenv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, cfg, getenv, newLogger(cfg.Log, stderr))
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, "kerneld", version)
	return err
}

// daemon is kerneld wired together.
type daemon struct {
	log      *slog.Logger
	registry *agents.Registry
	db       *memory.Store
	streams  *httpapi.Streams
	kernel   *kernel.Kernel
	handler  *httpapi.Server
}

// build wires kerneld together by hand.
func build(cfg Config, getenv func(string) string, log *slog.Logger) (*daemon, error) {
	m := metrics.New()
	toolRegistry := tools.NewRegistry(tools.Builtins()...)
	registry, err := agents.Load(cfg.AgentsDir, agents.Options{
		Providers: map[string]llm.Factory{"scripted": m.Provider("scripted", scripted.New)},
		KnownTool: toolRegistry.Has,
		Getenv:    getenv,
	})
	if err != nil {
		return nil, fmt.Errorf("load agents: %w", err)
	}
	d := &daemon{log: log, registry: registry, db: memory.New()}
	d.streams = httpapi.NewStreams(log.With("system", "http"), httpapi.StreamOptions{Heartbeat: cfg.HTTP.Heartbeat})
	d.kernel, err = kernel.New(kernel.Config{
		Agents: registry, Tools: toolRegistry, Store: m.Store(d.db), Limits: cfg.limits(),
		Observers: []kernel.Observer{d.streams, m, kernel.LogObserver{Log: log.With("system", "kernel")}},
		Logger:    log.With("system", "kernel"),
	})
	if err != nil {
		d.streams.Close()
		return nil, err
	}
	m.GaugeFunc("kerneld_streams_open", "Open SSE streams.", func() float64 { return float64(d.streams.Open()) })
	d.handler = httpapi.New(d.kernel, d.streams, httpapi.Options{
		Logger: log.With("system", "http"), APIKeys: cfg.apiKeys(), MaxBodyBytes: cfg.HTTP.MaxBodyBytes,
		RequestTimeout: cfg.HTTP.RequestTimeout, Metrics: m.Handler(), OpenAPI: api.OpenAPI, Version: version,
	})
	return d, nil
}

// serve builds kerneld and serves until ctx ends.
func serve(ctx context.Context, cfg Config, getenv func(string) string, log *slog.Logger) error {
	d, err := build(cfg, getenv, log)
	if err != nil {
		return err
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTP.Addr) // fail fast on a busy port
	if err != nil {
		d.streams.Close()
		return err
	}
	log.Info("kerneld listening", "addr", ln.Addr().String(), "version", version, "store", cfg.Store.Kind,
		"agents", len(d.registry.List()))
	return d.serve(ctx, ln, cfg.HTTP.ShutdownTimeout)
}

// serve serves on ln until ctx ends, reloading agents on SIGHUP, then
// shuts down in order: streams and HTTP first, then runs, then the store.
func (d *daemon) serve(ctx context.Context, ln net.Listener, shutdownTimeout time.Duration) error {
	srv := &http.Server{Handler: d.handler, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(d.handler.CloseStreams) // else Shutdown waits on open SSE streams
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
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
	httpErr := srv.Shutdown(shutdownCtx)   // 1. stop taking requests, end streams
	kernErr := d.kernel.Close(shutdownCtx) // 2. cancel runs and wait for them to record their end
	dbErr := d.db.Close()                  // 3. nothing writes any more
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, httpErr, kernErr, dbErr)
}

// reloadOnHangup reloads the agent definitions on every SIGHUP until ctx
// ends. A bad reload keeps the agents already loaded.
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
		if err := d.registry.Reload(); err != nil {
			d.log.Error("reload agents", "err", err)
			continue
		}
		d.log.Info("agents reloaded", "agents", len(d.registry.List()))
	}
}
