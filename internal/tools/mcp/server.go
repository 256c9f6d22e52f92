package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
)

// state is where a server is in its lifecycle.
type state int

const (
	stateStopped  state = iota // never started, or stopped by Close
	stateStarting              // one start is under way; callers wait for it
	stateRunning               // inst is connected and has listed its tools
	stateFailed                // the last start failed or the server crashed
)

// The states as Status reports them.
const (
	StateStopped  = "stopped"
	StateStarting = "starting"
	StateRunning  = "running"
	StateFailed   = "failed"
)

func (s state) String() string {
	return [...]string{StateStopped, StateStarting, StateRunning, StateFailed}[s]
}

// server is one configured MCP server across its incarnations: it starts
// one instance at a time, shares it between callers, and replaces it after
// a failure once the backoff has passed. Starts and stops run outside mu.
type server struct {
	m   *Manager
	cfg ServerConfig
	log *slog.Logger

	mu       sync.Mutex
	state    state
	inst     *instance     // the running instance; nil unless stateRunning
	err      error         // why it failed; nil unless stateFailed
	starting chan struct{} // closed when the start under way ends
	failures int           // failures in a row, for the backoff
	retryAt  time.Time     // no start before this
	closed   error         // why it was shut down for good (Manager.Close, Manager.Retain); nil until then
}

func newServer(m *Manager, cfg ServerConfig) *server {
	return &server{m: m, cfg: cfg, log: m.log.With("server", cfg.Name)}
}

// acquire returns the running instance, starting one if there is none and
// the backoff allows. Concurrent callers share one start. A server that is
// down and within its backoff fails at once.
func (s *server) acquire(ctx context.Context) (*instance, error) {
	inst, wait, err := s.tryAcquire()
	if wait == nil {
		return inst, err
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, fmt.Errorf("start mcp server %q: %w", s.cfg.Name, ctx.Err())
	}
	return s.afterStart()
}

// tryAcquire returns the running instance, or a channel to wait on for the
// start under way (beginning one if allowed), or why there is neither.
func (s *server) tryAcquire() (*instance, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed != nil:
		return nil, nil, s.closed
	case s.state == stateRunning:
		return s.inst, nil, nil
	case s.state == stateStarting:
		return nil, s.starting, nil
	case s.state == stateFailed && time.Now().Before(s.retryAt):
		return nil, nil, s.downErrLocked()
	}
	return nil, s.beginStartLocked(), nil
}

// afterStart is what a caller that has just waited for a start gets:
// whatever that start left behind, so one caller never starts the server
// twice.
func (s *server) afterStart() (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed != nil:
		return nil, s.closed
	case s.state == stateRunning:
		return s.inst, nil
	case s.state == stateFailed:
		return nil, s.downErrLocked()
	}
	return nil, fmt.Errorf("mcp server %q is %s: %w", s.cfg.Name, s.state, errdefs.ErrUnavailable)
}

// downErrLocked says that the server is down, why, and when it may be
// tried again.
func (s *server) downErrLocked() error {
	wait := time.Until(s.retryAt).Round(time.Millisecond)
	if wait <= 0 {
		return fmt.Errorf("mcp server %q is down: %w: %w", s.cfg.Name, errdefs.ErrUpstream, s.err)
	}
	return fmt.Errorf("mcp server %q is down, next start in %s: %w: %w", s.cfg.Name, wait, errdefs.ErrUpstream, s.err)
}

// beginStartLocked marks a start under way and runs it in a goroutine the
// Manager owns, so a caller that gives up does not abandon it for the
// others. It returns the channel closed when the start ends.
func (s *server) beginStartLocked() <-chan struct{} {
	restart := s.state == stateFailed
	s.state, s.err = stateStarting, nil
	ch := make(chan struct{})
	s.starting = ch
	if restart {
		s.log.Info("mcp server restarting", "failures", s.failures)
	} else {
		s.log.Info("mcp server starting")
	}
	if !s.m.spawn(s.start) {
		s.state, s.closed = stateStopped, errClosed
		close(ch)
	}
	return ch
}

// start connects to the server and records the outcome.
func (s *server) start(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.m.opts.StartTimeout)
	defer cancel()
	began := time.Now()
	inst, err := connect(ctx, s.cfg, s.log)
	if unwanted := s.finishStart(inst, err, time.Since(began)); unwanted != nil {
		unwanted.stop(errClosed)
	}
}

// finishStart records the end of a start, wakes its waiters and, when it
// succeeded, watches the instance for a crash. It returns an instance that
// connected after Close, for the caller to stop outside the lock.
func (s *server) finishStart(inst *instance, err error, took time.Duration) (unwanted *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(s.starting)
	if s.closed != nil {
		s.state = stateStopped
		return inst
	}
	if err != nil {
		s.failLocked(fmt.Errorf("start: %w", err), time.Time{})
		s.log.Warn("mcp server start failed", "err", err, "duration", took, "retry_in", s.m.opts.backoff(s.failures))
		return nil
	}
	if !s.m.spawn(func(context.Context) { s.watch(inst) }) {
		s.state, s.closed = stateStopped, errClosed
		return inst
	}
	s.state, s.inst = stateRunning, inst
	s.log.Info("mcp server started", append(inst.logArgs(), "duration", took, "tools", len(inst.tools))...)
	return nil
}

// watch waits for inst's connection to end. If inst was still the running
// instance, nobody stopped it on purpose: the server crashed.
func (s *server) watch(inst *instance) {
	err := inst.session.Wait()
	if err == nil {
		err = errExited
	}
	s.crashed(inst, err)
}

// errExited is why a server whose connection ended without an error failed.
var errExited = errors.New("server closed the connection")

// crashed marks the server failed because inst stopped working, and stops
// inst in the background. It does nothing if inst is no longer the running
// instance, so a crash seen by a caller and by the watcher is handled once.
func (s *server) crashed(inst *instance, cause error) {
	err := fmt.Errorf("mcp server %q crashed: %w: %w", s.cfg.Name, errdefs.ErrUpstream, cause)
	s.mu.Lock()
	current := s.inst == inst
	if current {
		s.inst = nil
		s.failLocked(fmt.Errorf("crashed: %w", cause), inst.started)
		s.log.Warn("mcp server crashed", append(inst.logArgs(), "err", cause, "retry_in", s.m.opts.backoff(s.failures))...)
	}
	s.mu.Unlock()
	if current && !s.m.spawn(func(context.Context) { inst.stop(err) }) {
		inst.stop(err)
	}
}

// failLocked records a failure and schedules the next start. err says what
// failed, for Status and for callers told that the server is down. upSince
// is when the failed instance connected (zero for a failed start): one
// that had been up for a healthy period starts the backoff again from the
// minimum.
func (s *server) failLocked(err error, upSince time.Time) {
	if !upSince.IsZero() && time.Since(upSince) >= s.m.opts.MaxBackoff {
		s.failures = 0
	}
	s.failures++
	s.state, s.err = stateFailed, err
	s.retryAt = time.Now().Add(s.m.opts.backoff(s.failures))
}

// shutdown stops the server for good and waits for its instance to stop.
// Calls in flight, and any made later, fail with cause.
func (s *server) shutdown(cause error) {
	s.mu.Lock()
	inst, wasRunning := s.inst, s.state == stateRunning
	s.closed, s.inst, s.state, s.err = cause, nil, stateStopped, nil
	s.mu.Unlock()
	if inst == nil {
		return
	}
	began := time.Now()
	inst.stop(cause)
	if wasRunning {
		s.log.Info("mcp server stopped", append(inst.logArgs(), "duration", time.Since(began))...)
	}
}

// status reports the state and, when failed, the last error.
func (s *server) status() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.String(), s.err
}

// toolsOf wraps inst's tools for callers whose calls time out after
// timeout.
func (s *server) toolsOf(inst *instance, timeout time.Duration) []tools.Tool {
	ts := make([]tools.Tool, 0, len(inst.tools))
	for _, t := range inst.tools {
		ts = append(ts, newTool(s, t, timeout))
	}
	return ts
}

// backoff is how long to wait before the next start after failures
// failures in a row: MinBackoff doubled for each one after the first, at
// most MaxBackoff.
func (o Options) backoff(failures int) time.Duration {
	d := o.MinBackoff
	for i := 1; i < failures && d < o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, o.MaxBackoff)
}
