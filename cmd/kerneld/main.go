// Command kerneld serves AI-agent sessions over HTTP with durable,
// resumable event streams. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/kerneld/kerneld/internal/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is err as kerneld reports it: after "kerneld: ", once, also
// for the client's errors, which name kerneld themselves ("kerneld: 404
// session_not_found: ...").
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "kerneld: ") {
		return msg
	}
	return "kerneld: " + msg
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
		case "export", "import":
			return transferMain(ctx, args[0], args[1:], getenv, os.Stdin, stdout, stderr)
		}
	}
	if cmd, ok := clientCommand(args); ok {
		return cliMain(ctx, cmd, getenv, stdout, stderr)
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
	if err := cfg.checkBinds(ctx, net.DefaultResolver.LookupHost); err != nil {
		return err
	}
	tracing, err := telemetry.New(ctx, telemetry.Options{Getenv: getenv, ServiceVersion: version,
		RecordContent: cfg.Telemetry.RecordContent})
	if err != nil {
		return err
	}
	stopProfile, err := cpuProfile(getenv("KERNELD_CPUPROFILE"))
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = serve(ctx, cfg, getenv, newLogger(cfg.Log, stderr, tracing.Enabled()), tracing)
	// Last: the spans of the runs the shutdown ended are exported too.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	return errors.Join(err, tracing.Shutdown(flushCtx))
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, "kerneld", version)
	return err
}

// cpuProfile starts a CPU profile of the server, written to path followed
// by the process id when it stops (several processes of a load test or a
// cluster each write their own), when path is set: how the figures in
// docs/benchmarks.md say where a server's time goes. It returns the stop.
func cpuProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("KERNELD_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("KERNELD_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
