// Command loadtest measures a kerneld binary from the outside, as its
// clients see it: it starts the server itself on a loopback port, drives
// fixed workloads against it over HTTP, and prints one Markdown table.
//
// It measures session creates per second and their latency (W1); the time
// to the first token with 1, 10 and 50 runs streaming at once, and runs
// and tokens delivered per second at 50 (W2); the token rate, the time to
// the first token and the server's memory growth during one long run
// (W3); the server's memory per idle session (W4); its memory when idle
// after start; and how many streams ended before their run did, how many
// resumes that took, and whether the resumed events came with no gap and
// no duplicate. Tokens are counted from the answer's text, not from its
// frames, and the frames per token, the bytes on the wire per token and
// the server's CPU time per create and per token are reported beside
// them: kerneld's, and kerneld's plus its store server's (Redis) when the
// store has one on this machine (see storeServer). CPU is read from
// /proc: a shared machine moves it far less than it moves rates and
// latencies.
//
// The agent answers with its input at the scripted model's full speed
// (token_delay 0), so the server, not the model, sets the pace. Every
// workload runs against a fresh server and data directory per store
// (memory and sqlite) and has a deadline; each cell is the median of
// -count rounds. The server is pinned to CPU 0 with taskset; run the load
// generator on another CPU (make loadtest does) so the two do not compete.
//
// With -base REF it also builds kerneld at the git ref REF and runs every
// workload on both builds, interleaved, so both see the same noise.
//
// On the redis store it starts several replicas sharing one Redis server
// (-replicas 1,2,3), spreads the clients over them (create on one, stream
// from another), and W5 measures how far a subscriber on another replica
// trails the stream on the replica that runs the session.
//
//	make loadtest
//	make loadtest LOADTEST_ARGS='-base main -quick'
//	make loadtest LOADTEST_ARGS='-stores sqlite,redis -replicas 1,2,3 -workloads W1,W2,W5'
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	kerneld    string
	base       string
	setups     []setup
	redisURL   string
	pgURL      string
	workloads  []workload
	serverCPUs string
	sizes      sizes
	count      int
	timeout    time.Duration
	cpuProfile string
	tracing    bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var (
		o                           options
		stores, workNames, replicas string
		quick                       bool
	)
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kerneld, "kerneld", "bin/kerneld", "the kerneld binary to measure")
	fs.StringVar(&o.base, "base", "", "also build kerneld at this git ref and compare, e.g. main")
	fs.StringVar(&stores, "stores", "memory,sqlite", "stores to run each workload on")
	fs.StringVar(&replicas, "replicas", "1", "replica counts to run the redis and postgres stores with, e.g. 1,2,3")
	fs.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "the Redis server of -stores redis; each workload uses keys of its own and deletes them")
	fs.StringVar(&o.pgURL, "postgres-url", "postgres://postgres@127.0.0.1:5432/postgres", "a database of the PostgreSQL server of -stores postgres; each workload creates a database of its own and drops it")
	fs.StringVar(&workNames, "workloads", "W1,W2,W3,W4", "workloads to run (W5: subscriber lag, for replicas)")
	fs.StringVar(&o.serverCPUs, "server-cpus", "0", `taskset CPU list for kerneld; "" runs it unpinned`)
	fs.BoolVar(&quick, "quick", false, "smaller workloads, for a quick look")
	fs.IntVar(&o.count, "count", 3, "rounds; each cell is the median of its rounds (1 with -quick)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "bound on the whole run")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the load generator's CPU profile here, to check it is not the bottleneck")
	fs.BoolVar(&o.tracing, "tracing", false, "measure the build with tracing off and on (OTLP/HTTP to a receiver in this process that accepts everything), interleaved")
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.sizes = fullSizes
	if quick {
		o.sizes = quickSizes
		if !flagSet(fs, "count") {
			o.count = 1
		}
	}
	if o.count < 1 {
		return o, errors.New("-count must be at least 1")
	}
	if o.setups, err = parseSetups(stores, replicas); err != nil {
		return o, err
	}
	for _, name := range strings.Split(workNames, ",") {
		i := slices.IndexFunc(workloads, func(w workload) bool { return strings.EqualFold(w.name, name) })
		if i < 0 {
			return o, fmt.Errorf("-workloads: unknown workload %q (W1, W2, W3, W4, W5)", name)
		}
		o.workloads = append(o.workloads, workloads[i])
	}
	return o, nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// run is main with its dependencies passed in. "loadtest soak …" runs
// the soak instead (see soak.go).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "soak" {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runSoak(ctx, args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		stopProfile, err := startProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tmp, err := os.MkdirTemp("", "kerneld-loadtest-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a leftover temp dir is harmless
	builds, err := o.builds(ctx, tmp, stderr)
	if err != nil {
		return err
	}
	if o.tracing {
		stopReceiver, err := withTracing(&builds, stdout)
		if err != nil {
			return err
		}
		defer stopReceiver()
	}
	if o.serverCPUs != "" {
		if _, err := exec.LookPath("taskset"); err != nil {
			_, _ = fmt.Fprintln(stderr, "taskset not found: kerneld runs unpinned")
			o.serverCPUs = ""
		}
	}
	labels := make([]string, len(builds))
	for i, b := range builds {
		labels[i] = b.label
	}
	res := newResults(labels)
	sum := summary{began: time.Now(), loadBefore: loadAverage(), args: args}
rounds:
	for round := range o.count {
		for wi, w := range o.workloads {
			for _, st := range o.setups {
				for _, b := range buildOrder(len(builds), round+wi) {
					if ctx.Err() != nil {
						break rounds
					}
					m := measurement{w: w, setup: st, build: b, round: round}
					m.measure(ctx, o, builds[b], filepath.Join(tmp, m.name()), res, stderr)
				}
			}
		}
	}
	sum.elapsed, sum.loadAfter = time.Since(sum.began), loadAverage()
	if err := sum.write(stdout, o, builds, res); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	if len(res.notes) > 0 {
		return fmt.Errorf("%d problems; see the notes under the table", len(res.notes))
	}
	return ctx.Err()
}

// startProfile starts profiling the load generator's CPU into path.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// builds returns the binaries to measure: the base build first, when
// there is one, so the change column reads from base to this one.
func (o options) builds(ctx context.Context, tmp string, log io.Writer) ([]build, error) {
	cur, err := currentBuild(ctx, o.kerneld)
	if err != nil || o.base == "" {
		return []build{cur}, err
	}
	base, err := buildAt(ctx, o.base, tmp, log)
	if err != nil {
		return nil, err
	}
	return []build{base, cur}, nil
}

// buildOrder interleaves the builds: they take turns at going first, so
// neither always runs on a machine the other has just warmed or loaded.
func buildOrder(n, turn int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if turn%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// measurement is one workload on one setup and build.
type measurement struct {
	w     workload
	setup setup
	build int
	round int
}

func (m measurement) name() string {
	return fmt.Sprintf("%s-%s-%d-%d-%d", m.w.name, m.setup.store, m.setup.replicas, m.build, m.round)
}

// measure starts a fresh server, records its idle memory, runs the
// workload under its deadline and stops the server. A failure becomes a
// note under the table; the other workloads still run.
func (m measurement) measure(ctx context.Context, o options, b build, dir string, res *results, log io.Writer) {
	what := fmt.Sprintf("%s %s %s", m.w.name, m.setup, b.label)
	cl := newClient()
	defer cl.close()
	srv, err := startCluster(ctx, cl.hc, serverSpec{
		binary: b.binary, store: m.setup.store, replicas: m.setup.replicas, cpus: o.serverCPUs, dir: dir,
		redisURL: o.redisURL, redisPrefix: fmt.Sprintf("loadtest-%d-%s:", os.Getpid(), m.name()), env: b.env,
		postgresURL: o.pgURL, postgresDB: strings.ToLower(fmt.Sprintf("loadtest_%d_%s", os.Getpid(), strings.ReplaceAll(m.name(), "-", "_"))),
	})
	if err != nil {
		res.note("%s: %v", what, err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }() // a leftover temp dir is harmless
	rec := func(metric string, k kind, v float64) { res.add(metric, k, m.setup.String(), m.build, v) }
	if rss, _, err := srv.procs[0].memory(); err == nil {
		rec("idle RSS after ready", kindBytes, float64(rss))
	}
	wctx, cancel := context.WithTimeout(ctx, m.w.timeout)
	start := time.Now()
	cpu0, _ := srv.cpuTime()
	wait0, _ := srv.cpuWait()
	self0 := selfCPU()
	err = m.w.run(wctx, &env{cl: cl, srv: srv, sz: o.sizes, rec: rec, remark: res.remark})
	cancel()
	elapsed := time.Since(start)
	cpu1, _ := srv.cpuTime()
	wait1, _ := srv.cpuWait()
	self1 := selfCPU()
	res.time(elapsed, cpu1-cpu0, wait1-wait0, self1-self0)
	cl.close()
	if err != nil {
		if logged := srv.logProblems(10); logged != "" {
			err = fmt.Errorf("%w; kerneld logged:\n%s", err, logged)
		}
		res.note("%s: %v", what, err)
	}
	if err := srv.stop(); err != nil {
		res.note("%s: %v", what, err)
	}
	_, _ = fmt.Fprintf(log, "%s: %.1fs, kerneld on a CPU %.0f%% of it, its threads waiting for one %.2f s/s, the load generator on one %.0f%%\n",
		what, elapsed.Seconds(), 100*(cpu1-cpu0).Seconds()/elapsed.Seconds(), (wait1-wait0).Seconds()/elapsed.Seconds(),
		100*(self1-self0).Seconds()/elapsed.Seconds())
}

// selfCPU returns the CPU time the load generator has used, user and
// system, its children (the servers) not included.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// summary is what the report says besides the table.
type summary struct {
	args                  []string
	began                 time.Time
	elapsed               time.Duration
	loadBefore, loadAfter string
}

// write writes the summary to out in one write; the tool's exit status
// reports a failed one.
func (s summary) write(out io.Writer, o options, builds []build, res *results) error {
	w := new(bytes.Buffer)
	fmt.Fprintln(w, "### kerneld load test")
	fmt.Fprintln(w)
	res.writeTable(w)
	fmt.Fprintln(w)
	for _, wl := range o.workloads {
		fmt.Fprintf(w, "- %s: %s.\n", wl.name, wl.about(o.sizes))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Machine: %s.\n", readMachine())
	for _, b := range builds {
		fmt.Fprintf(w, "Build %s: %s.\n", b.label, b.goVersion())
	}
	pin := "unpinned"
	if o.serverCPUs != "" {
		pin = "on CPU " + o.serverCPUs + " (taskset -c " + o.serverCPUs + ")"
	}
	fmt.Fprintf(w, "kerneld %s; the load generator (%s) on CPU %s.\n", pin, runtime.Version(), affinity())
	fmt.Fprintf(w, "Command: `%s`, %d round(s), %s; load average %s before, %s after.\n",
		strings.Join(append([]string{"loadtest"}, s.args...), " "), o.count, s.elapsed.Round(time.Second), s.loadBefore, s.loadAfter)
	if res.measured > 0 {
		fmt.Fprintf(w, "During the workloads kerneld was on a CPU %.0f%% of the time, and its threads waited, runnable, "+
			"for a CPU %.2f s per second (time other processes on its core took); the load generator used %.0f%% of a CPU.\n",
			100*res.cpuUsed.Seconds()/res.measured.Seconds(), res.cpuWait.Seconds()/res.measured.Seconds(),
			100*res.clientCPU.Seconds()/res.measured.Seconds())
	}
	for _, r := range res.remarks {
		fmt.Fprintf(w, "%s.\n", r)
	}
	if len(res.notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Notes:")
		for _, n := range res.notes {
			fmt.Fprintf(w, "- %s\n", strings.ReplaceAll(n, "\n", "\n  "))
		}
	}
	_, err := out.Write(w.Bytes())
	return err
}
