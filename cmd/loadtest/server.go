package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Launch bounds.
const (
	readyTimeout = 30 * time.Second // start to /readyz 200, migrations included
	stopTimeout  = 20 * time.Second // SIGTERM to exit; kerneld's own shutdown timeout is 10 s
)

// The files every server of a workload shares: kerneld's defaults, and one
// agent that answers with its input, token by token, as fast as the
// scripted model can stream it (token_delay 0). N input words make N
// assistant TEXT_MESSAGE_CONTENT events.
const (
	configYAML = `# kerneld as the load test runs it: the defaults. Address, store, data
# directory and agents directory are flags, since each replica has its own.
log:
  format: text
  level: info
`
	agentYAML = `name: echo
description: Echoes the input back as fast as the scripted model streams.
model:
  provider: scripted
  token_delay: 0s
  script:
    - text: "{input}"
system_prompt: You repeat the user's input back to them.
`
	// pacedAgentYAML streams like a fast hosted model, 500 tokens/s, so
	// W5's lag is the delivery's and not a backlog's.
	pacedAgentYAML = `name: paced
description: Echoes the input back at 500 tokens/s.
model:
  provider: scripted
  token_delay: 2ms
  script:
    - text: "{input}"
system_prompt: You repeat the user's input back to them.
`
)

// noQuotas lifts the per-tenant quotas: the load is one tenant's, far
// above any tenant's fair share. They are set in the environment, not the
// config file, which a build from before quotas (-base) would refuse.
var noQuotas = []string{
	"KERNELD_REQUESTS_PER_SECOND=0", "KERNELD_MAX_SESSIONS=0", "KERNELD_RUNS_PER_MINUTE=0",
	"KERNELD_MAX_CONCURRENT_RUNS=0", "KERNELD_TOKENS_PER_DAY=0",
}

// serverSpec says how to start kerneld for one workload.
type serverSpec struct {
	binary      string
	store       string // memory or sqlite (each replica its own), or redis or postgres (shared)
	replicas    int    // processes; more than one only on the shared store
	cpus        string // taskset CPU list for every server process; "" runs them unpinned
	dir         string // a fresh scratch directory: config, agents, data, logs
	redisURL    string // the redis store's server
	redisPrefix string // the redis store's keys for this workload alone
	postgresURL string // the postgres store's server: a database is made per workload
	postgresDB  string // the workload's database's name
	dbURL       string // and its URL, set by startCluster
	// agents are more agent files, by name, beside the echo and paced agents.
	agents map[string]string
	env    []string // more environment for every server process, NAME=value
}

// cluster is the kerneld processes serving one workload, one process and
// one base URL per replica. Workloads address them through url(i): create
// on one replica, stream from another.
type cluster struct {
	procs []*server
	spec  serverSpec
	// store is the store's server, when it has one on this machine, and
	// storeErr why it has none when the store needs one.
	store    *storeServer
	storeErr error
}

// storeAddr returns the host:port of the server the store keeps its data
// in, or "" for a store inside kerneld.
func (s serverSpec) storeAddr() string {
	switch s.store {
	case "redis":
		if opts, err := redis.ParseURL(s.redisURL); err == nil {
			return opts.Addr
		}
	case "postgres":
		if u, err := url.Parse(s.postgresURL); err == nil {
			host, port := u.Hostname(), u.Port()
			if port == "" {
				port = "5432"
			}
			return net.JoinHostPort(host, port)
		}
	}
	return ""
}

// storeCPU returns the CPU time the store's server has used so far: 0 for
// a store inside kerneld, an error when the server could not be found.
func (c *cluster) storeCPU() (time.Duration, error) {
	switch {
	case c.storeErr != nil:
		return 0, c.storeErr
	case c.store == nil:
		return 0, nil
	}
	return c.store.cpuTime()
}

// url returns the base URL of replica i modulo the number of replicas.
func (c *cluster) url(i int) string { return c.procs[i%len(c.procs)].url }

// startCluster writes the shared files and starts spec.replicas servers,
// returning once every one answers /readyz.
func startCluster(ctx context.Context, hc *http.Client, spec serverSpec) (*cluster, error) {
	if spec.replicas != 1 && !shared(spec.store) {
		return nil, fmt.Errorf("%d replicas of the %s store: only the redis and postgres stores are shared", spec.replicas, spec.store)
	}
	if spec.store == "postgres" {
		db, err := createDatabase(ctx, spec.postgresURL, spec.postgresDB)
		if err != nil {
			return nil, err
		}
		spec.dbURL = db
	}
	if err := writeFiles(spec.dir, spec.agents); err != nil {
		return nil, err
	}
	c := &cluster{spec: spec}
	if addr := spec.storeAddr(); addr != "" {
		c.store, c.storeErr = findStoreServer(addr)
	}
	for i := range spec.replicas {
		s, err := startServer(ctx, hc, spec, i)
		if err != nil {
			return nil, errors.Join(err, c.stop())
		}
		c.procs = append(c.procs, s)
	}
	return c, nil
}

// stop stops every server (see server.stop) and deletes what they stored
// in Redis.
func (c *cluster) stop() error {
	var errs []error
	for _, s := range c.procs {
		errs = append(errs, s.stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	switch c.spec.store {
	case "redis":
		if err := deleteKeys(ctx, c.spec.redisURL, c.spec.redisPrefix); err != nil {
			errs = append(errs, fmt.Errorf("delete the workload's Redis keys: %w", err))
		}
	case "postgres":
		if err := dropDatabase(ctx, c.spec.postgresURL, c.spec.postgresDB); err != nil {
			errs = append(errs, fmt.Errorf("drop the workload's database: %w", err))
		}
	}
	return errors.Join(errs...)
}

func writeFiles(dir string, agents map[string]string) error {
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kerneld.yaml"), []byte(configYAML), 0o644); err != nil {
		return err
	}
	for name, def := range agents {
		if err := os.WriteFile(filepath.Join(dir, "agents", name+".yaml"), []byte(def), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", "echo.yaml"), []byte(agentYAML), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "agents", "paced.yaml"), []byte(pacedAgentYAML), 0o644)
}

// server is one kerneld process.
type server struct {
	url     string
	pid     int
	logPath string
	exited  chan struct{} // closed once the process has exited
	err     error         // how it exited; read only after exited is closed
	cmd     *exec.Cmd
}

// startServer starts replica i of spec on a free loopback port, pinned
// with taskset when spec.cpus is set (taskset execs kerneld, so the pid is
// kerneld's), and waits until it is ready.
func startServer(ctx context.Context, hc *http.Client, spec serverSpec, i int) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{
		"-config", filepath.Join(spec.dir, "kerneld.yaml"), "--addr", addr,
		"--agents-dir", filepath.Join(spec.dir, "agents"), "--store", spec.store,
		"--data-dir", filepath.Join(spec.dir, fmt.Sprintf("data-%d", i)),
	}
	switch spec.store {
	case "redis":
		args = append(args, "--redis-url", spec.redisURL, "--replica", fmt.Sprintf("loadtest-%d", i))
	case "postgres":
		args = append(args, "--postgres-url", spec.dbURL, "--replica", fmt.Sprintf("loadtest-%d", i))
	}
	name := spec.binary
	if spec.cpus != "" {
		name, args = "taskset", append([]string{"-c", spec.cpus, spec.binary}, args...)
	}
	s := &server{url: "http://" + addr, logPath: filepath.Join(spec.dir, fmt.Sprintf("kerneld-%d.log", i)), exited: make(chan struct{})}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	s.cmd = exec.Command(name, args...)    //nolint:noctx // stopped with SIGTERM by stop, never killed with a context
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.Env = append(os.Environ(), "KERNELD_REDIS_PREFIX="+spec.redisPrefix)
	s.cmd.Env = append(s.cmd.Env, noQuotas...)
	s.cmd.Env = append(s.cmd.Env, spec.env...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // no server outlives the load test
	if err := s.run(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := s.waitReady(ctx, hc); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// run starts the process and a goroutine that waits for it; stop waits
// for that goroutine. The parent death signal is sent when the OS thread
// that forked the child ends, not the process (golang/go#27505), and Go
// may end a thread while the process lives: the goroutine holds the thread
// it forked from until the server exits, so the signal means what it says.
func (s *server) run() error {
	started := make(chan error, 1)
	go func() {
		defer close(s.exited)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := s.cmd.Start(); err != nil {
			s.err = err
			started <- err
			return
		}
		s.pid = s.cmd.Process.Pid
		started <- nil
		s.err = s.cmd.Wait()
	}()
	return <-started
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr() (string, error) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }() // only its port was wanted
	return ln.Addr().String(), nil
}

// waitReady polls /readyz until it answers 200.
func (s *server) waitReady(ctx context.Context, hc *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx, hc, s.url) {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("kerneld exited before it was ready (%w); log %s:\n%s", s.err, s.logPath, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("kerneld not ready after %s; log %s:\n%s", readyTimeout, s.logPath, s.logTail())
		case <-tick.C:
		}
	}
}

func ready(ctx context.Context, hc *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	if err != nil {
		return false
	}
	res, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = res.Body.Close() }() // only the status matters
	return res.StatusCode == http.StatusOK
}

// stop sends SIGTERM and waits for the process to exit, killing it if
// it takes longer than stopTimeout. An exit other than a clean one is
// an error: kerneld should shut down cleanly under any load.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return s.exitError()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // it may have exited since
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-s.exited:
		return s.exitError()
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("kerneld (pid %d) did not stop within %s of SIGTERM; killed", s.pid, stopTimeout)
	}
}

func (s *server) exitError() error {
	if s.err != nil {
		return fmt.Errorf("kerneld (pid %d) exited: %w; log %s:\n%s", s.pid, s.err, s.logPath, s.logTail())
	}
	return nil
}

// logTail returns the last lines of the server's log.
func (s *server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// cpuTime returns the CPU time the servers have used so far, user and
// system, all threads.
func (c *cluster) cpuTime() (time.Duration, error) {
	var sum time.Duration
	for _, s := range c.procs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/stat")
		if err != nil {
			return 0, err
		}
		st, err := parseProcStat(b)
		if err != nil {
			return 0, err
		}
		sum += st.own
	}
	return sum, nil
}

// cpuWait returns how long the servers' threads have been runnable but
// waiting for a CPU, from /proc/PID/task/*/schedstat: on a shared machine,
// the time other processes took from them.
func (c *cluster) cpuWait() (time.Duration, error) {
	var sum time.Duration
	for _, s := range c.procs {
		tasks, err := filepath.Glob("/proc/" + strconv.Itoa(s.pid) + "/task/*/schedstat")
		if err != nil || len(tasks) == 0 {
			return 0, fmt.Errorf("no schedstat for pid %d", s.pid)
		}
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // the thread has exited
			}
			f := strings.Fields(string(b))
			if len(f) < 2 {
				return 0, fmt.Errorf("%s: %q", t, b)
			}
			ns, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", t, err)
			}
			sum += time.Duration(ns)
		}
	}
	return sum, nil
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture kerneld is built for.
const clockTick = 10 * time.Millisecond

// logProblems returns the lines of the servers' logs that say something
// went wrong or that they were told to stop, at most limit of them: what a
// note about a failed workload should show.
func (c *cluster) logProblems(limit int) string {
	var out []string
	for _, s := range c.procs {
		b, err := os.ReadFile(s.logPath)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") ||
				strings.Contains(line, `msg="shutting down"`) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out[max(0, len(out)-limit):], "\n")
}

// memory returns the process's resident set (VmRSS) and its peak so far
// (VmHWM), in bytes, from /proc/PID/status.
func (s *server) memory() (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus reads VmRSS and VmHWM ("VmRSS:   12345 kB") from the text
// of /proc/PID/status.
func parseStatus(b []byte) (rss, hwm int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	found := 0
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc status %s: %q", name, value)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc status: no VmRSS or VmHWM")
	}
	return rss, hwm, nil
}
