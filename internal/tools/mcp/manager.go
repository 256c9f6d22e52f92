// Package mcp connects kerneld to Model Context Protocol servers and offers
// their tools as tools.Tool values named "<server>__<tool>".
//
// It owns the servers' lifecycles: it starts a server on first use, shares it
// between every caller with the same configuration, restarts it with backoff
// after a crash, and stops it (for a command, its whole process group) on
// Close. It must not decide which agent may call which tool (internal/agents
// does), and it sits below internal/agents and internal/kernel, so it imports
// neither: callers translate their configuration into a ServerConfig.
package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
)

// Separator joins a server's name and its tool's name in the names models
// see, as in "everything__echo". It matches agents.MCPSeparator.
const Separator = "__"

// Defaults for what Options and ServerConfig leave zero.
const (
	defaultCallTimeout  = 60 * time.Second
	defaultStartTimeout = 30 * time.Second
	defaultMinBackoff   = time.Second
	defaultMaxBackoff   = 30 * time.Second
)

// ServerConfig describes one MCP server: a command speaking MCP over stdio
// (Command, Args, Env) or an endpoint speaking streamable HTTP (URL,
// Headers). Exactly one of Command and URL is set.
type ServerConfig struct {
	Name        string            // also the tool name prefix
	Command     string            // stdio: the command, its args and extra environment
	Args        []string          //
	Env         map[string]string // added to HOME, LOGNAME, PATH, SHELL, TERM and USER
	URL         string            // streamable HTTP: the endpoint and extra request headers
	Headers     map[string]string //
	CallTimeout time.Duration     // one tool call; 0 means 60s
	// Scope, when set, keeps the server to those asking with the same
	// scope: two configurations alike but for it get a server each (a
	// session's own servers are never shared with another session).
	Scope string
}

// Options configure a Manager. Zero fields take the defaults noted.
type Options struct {
	// Logger receives start, stop, crash and restart logs; the Manager adds
	// "system"="mcp" and "server". Nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds connecting, initializing and listing tools; 30s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a failed server is
	// started again; it doubles with each failure in a row, from 1s to 30s.
	// A server that stayed up for MaxBackoff counts as healthy, and its
	// next failure starts the doubling again from MinBackoff.
	MinBackoff, MaxBackoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = defaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(defaultMaxBackoff, o.MinBackoff)
	}
	return o
}

// errClosed is returned once Close has been called.
var errClosed = fmt.Errorf("mcp manager closed: %w", errdefs.ErrUnavailable)

// Manager runs the MCP servers kerneld's agents use. It owns every goroutine
// it starts (server starts, crash watchers, background stops); Close cancels
// and waits for them. Its methods are safe for concurrent use.
type Manager struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context // parent of every start; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards closed and servers
	closed  bool
	servers map[string]*server // by configKey
}

// NewManager returns a Manager with no servers running.
func NewManager(opts Options) *Manager {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		opts:    opts,
		log:     opts.Logger.With("system", "mcp"),
		ctx:     ctx,
		cancel:  cancel,
		servers: make(map[string]*server),
	}
}

// Tools returns the tools of the server described by cfg, each named
// "<cfg.Name>__<tool>" with the server's description and input schema. The
// server is started on first use and shared by every caller with the same
// config. A server that failed to start is retried no sooner than its
// backoff; until then Tools fails at once with the last error.
func (m *Manager) Tools(ctx context.Context, cfg ServerConfig) ([]tools.Tool, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s, err := m.server(cfg)
	if err != nil {
		return nil, err
	}
	inst, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return s.toolsOf(inst, cfg.callTimeout()), nil
}

// Status reports the server's state for operators: "running", "starting",
// "stopped" (never started, or stopped by Close), or "failed" with the last
// error.
func (m *Manager) Status(cfg ServerConfig) (state string, err error) {
	m.mu.Lock()
	s := m.servers[cfg.key()]
	m.mu.Unlock()
	if s == nil {
		return stateStopped.String(), nil
	}
	return s.status()
}

// Close stops every server (a command's whole process group) and waits for
// them and for every goroutine the Manager started, or for ctx to end.
// Tools fails once Close has been called.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	servers := make([]*server, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	m.cancel() // abandons starts under way

	done := make(chan struct{})
	go func() {
		var stops sync.WaitGroup
		for _, s := range servers {
			stops.Go(func() { s.shutdown(errClosed) })
		}
		stops.Wait()
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close mcp servers: %w", ctx.Err())
	}
}

// Retain keeps the servers whose configuration is among keep and stops the
// others in the background, each as Close stops it; Close waits for those
// stops too. Calls in flight on a stopped server, and later calls through
// its tools, fail saying it is no longer configured; Tools for its
// configuration would start a new one. kerneld calls it once it has
// reloaded its agents, so that a server no agent names any more, or one
// whose configuration changed, does not run until shutdown. It returns the
// names of the servers it stops.
func (m *Manager) Retain(keep []ServerConfig) []string {
	wanted := make(map[string]bool, len(keep))
	for _, cfg := range keep {
		wanted[cfg.key()] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	var stopped []string
	for key, s := range m.servers {
		if wanted[key] {
			continue
		}
		delete(m.servers, key)
		stopped = append(stopped, s.cfg.Name)
		cause := fmt.Errorf("mcp server %q is no longer configured: %w", s.cfg.Name, errdefs.ErrUnavailable)
		m.wg.Go(func() { s.shutdown(cause) }) // m.mu is held and m is open: as spawn would
	}
	slices.Sort(stopped)
	return stopped
}

// Stop stops the servers of cfgs that run, in the background, each as
// Close stops it; Close waits for those stops too. Tools for one of them
// would start a new one. It returns the names of the servers it stops.
func (m *Manager) Stop(cfgs ...ServerConfig) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	var stopped []string
	for _, cfg := range cfgs {
		key := cfg.key()
		s, ok := m.servers[key]
		if !ok {
			continue
		}
		delete(m.servers, key)
		stopped = append(stopped, s.cfg.Name)
		cause := fmt.Errorf("mcp server %q was stopped: %w", s.cfg.Name, errdefs.ErrUnavailable)
		m.wg.Go(func() { s.shutdown(cause) }) // m.mu is held and m is open: as spawn would
	}
	return stopped
}

// server returns the server for cfg, creating it on first use.
func (m *Manager) server(cfg ServerConfig) (*server, error) {
	key := cfg.key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	s, ok := m.servers[key]
	if !ok {
		s = newServer(m, cfg)
		m.servers[key] = s
	}
	return s, nil
}

// spawn runs f in a goroutine the Manager owns. It reports false, and does
// not run f, once Close has been called.
func (m *Manager) spawn(f func(ctx context.Context)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Go(func() { f(m.ctx) })
	return true
}

// validate checks the shape of cfg.
func (c ServerConfig) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("mcp server: name is required: %w", errdefs.ErrInvalid)
	case (c.Command == "") == (c.URL == ""):
		return fmt.Errorf("mcp server %q: exactly one of command and url is required: %w", c.Name, errdefs.ErrInvalid)
	}
	return nil
}

func (c ServerConfig) callTimeout() time.Duration {
	if c.CallTimeout <= 0 {
		return defaultCallTimeout
	}
	return c.CallTimeout
}

// key identifies the server process or endpoint cfg describes: a hash of
// every field but CallTimeout, so two agents that differ only in how long
// they wait for a call share one server. Each gets tools with its own
// timeout.
func (c ServerConfig) key() string {
	c.CallTimeout = 0
	b, err := json.Marshal(c) // maps marshal with sorted keys
	if err != nil {
		panic(errors.Join(errors.New("mcp: marshal server config"), err)) // strings only: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
