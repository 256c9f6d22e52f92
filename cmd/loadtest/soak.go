package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The soak ("loadtest soak") drives a mixed load against a kerneld it
// starts on a loopback port, for a bounded time, and fails on anything a
// long-lived server must never do: answer 5xx, skip or repeat a seq in
// any stream read, leave a run unfinished after the load, or keep the
// memory, goroutines or descriptors the load took once it is gone.
//
// Each worker repeats, until the time is up, one of three scenarios on a
// session of its own, which it deletes at the end: a conversation (runs
// that call two tools, streamed inline and cut short at random, resumed
// with Last-Event-ID, with a subscriber that keeps reconnecting), a
// cancel mid-run, and posts to a busy session with every if_busy. Before
// the load, a short warm-up of the same load brings the server to its
// working size; the idle figures after the warm-up are the baseline the
// figures after the load are held to.
//
//	make soak
//	make soak SOAK_ARGS='-duration 60s'

// soakOptions are the soak's flags.
type soakOptions struct {
	kerneld  string
	store    string
	duration time.Duration
	warmup   time.Duration
	workers  int
}

func parseSoakFlags(args []string, stderr io.Writer) (soakOptions, error) {
	var (
		o     soakOptions
		short bool
	)
	fs := flag.NewFlagSet("loadtest soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kerneld, "kerneld", "bin/kerneld", "the kerneld binary to soak")
	fs.StringVar(&o.store, "store", "sqlite", "the store: sqlite or memory")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the load runs")
	fs.BoolVar(&short, "short", false, "a 60-second soak, as CI runs it (-duration wins if given)")
	fs.IntVar(&o.workers, "workers", 8, "clients running scenarios at once")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if short && !flagSet(fs, "duration") {
		o.duration = time.Minute
	}
	if o.store != "sqlite" && o.store != "memory" {
		return o, fmt.Errorf("-store: unknown store %q (sqlite, memory)", o.store)
	}
	if o.duration < 10*time.Second || o.workers < 1 {
		return o, errors.New("-duration must be at least 10s and -workers at least 1")
	}
	o.warmup = min(o.duration/6, 30*time.Second)
	return o, nil
}

// soakAgent calls two tools, then answers with its input word by word.
const soakAgent = `name: soaker
description: Checks the time, saves the input to memory, then repeats it.
model:
  provider: scripted
  token_delay: 2ms
  script:
    - text: "Let me check."
      tool_calls:
        - {name: current_time, arguments: {timezone: UTC}}
        - {name: memory_set, arguments: {key: last, value: "{input}"}}
    - text: "{input}"
tools: [current_time, memory_set]
`

// Bounds of the phases around the load.
const (
	settleTimeout = time.Minute // for every run to end and every session to go
	idlePause     = 2 * time.Second
)

// runSoak is "loadtest soak".
func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSoakFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kerneld-soak-")
	if err != nil {
		return err
	}
	keep := false // a failed soak keeps the server's log and data
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir) // a leftover temp dir is harmless
		}
	}()
	cl := newClient()
	defer cl.close()
	srv, err := startCluster(ctx, cl.hc, serverSpec{binary: o.kerneld, store: o.store, replicas: 1,
		dir: filepath.Join(dir, "server"), agents: map[string]string{"soaker": soakAgent}})
	if err != nil {
		return err
	}
	rep := &soakReport{opts: o}
	err = soak(ctx, o, cl, srv.procs[0], rep, stderr)
	err = errors.Join(err, srv.stop())
	if err != nil {
		rep.problem("%v", err)
	}
	rep.write(stdout)
	if n := len(rep.problems); n > 0 {
		keep = true
		return fmt.Errorf("the soak failed: %d problems (above); server log: %s", n, srv.procs[0].logPath)
	}
	return nil
}

// soak runs the warm-up, takes the baseline, runs the load, and checks
// what it left.
func soak(ctx context.Context, o soakOptions, cl *client, srv *server, rep *soakReport, log io.Writer) error {
	_, _ = fmt.Fprintf(log, "soak: warm-up for %s, then %s of load with %d workers on %s\n", o.warmup, o.duration, o.workers, srv.url)
	warm := &soakStats{}
	runLoad(ctx, o.warmup, o.workers, &soaker{cl: cl, base: srv.url, stats: warm})
	if err := settle(ctx, cl, srv.url); err != nil {
		return fmt.Errorf("after the warm-up: %w", err)
	}
	if warm.failures > 0 || warm.fiveXX.Load() > 0 {
		rep.problem("the warm-up had %d client-side failures and %d 5xx; the first:\n  %s",
			warm.failures, warm.fiveXX.Load(), strings.Join(warm.problems, "\n  "))
	}
	base, err := idleSample(ctx, cl, srv)
	if err != nil {
		return err
	}
	rep.base = base
	began := time.Now()
	runLoad(ctx, o.duration, o.workers, &soaker{cl: cl, base: srv.url, stats: &rep.stats, peak: &rep.peakRSS, srv: srv})
	rep.elapsed = time.Since(began)
	_, _ = fmt.Fprintf(log, "soak: load done after %s; settling\n", rep.elapsed.Round(time.Second))
	if err := settle(ctx, cl, srv.url); err != nil {
		rep.problem("after the load: %v", err)
	}
	end, err := idleSample(ctx, cl, srv)
	if err != nil {
		return err
	}
	rep.end = end
	rep.check()
	return ctx.Err()
}

// idleSample waits a moment for the server to go idle, with the client's
// connections closed, and samples it.
func idleSample(ctx context.Context, cl *client, srv *server) (sample, error) {
	cl.close()
	if err := sleepCtx(ctx, idlePause); err != nil {
		return sample{}, err
	}
	s, err := sampleServer(ctx, cl.hc, srv)
	cl.close() // the /metrics connection
	return s, err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// httpGet is a GET under ctx.
func httpGet(ctx context.Context, hc *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}
