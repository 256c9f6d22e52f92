// Package kernel is kerneld's multi-session runtime. It creates and loads
// sessions, accepts runs, drives the agent loop (model calls, tool calls,
// cancellation, limits) and emits every event through the event log and
// then its observers.
//
// The kernel is the one service internal/httpapi calls. It never imports
// net/http: transport concerns stay in httpapi, storage behind Store.
package kernel

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// Limits bound what clients and agents may store and do.
type Limits struct {
	MaxNameLength       int           // session name, in bytes
	MaxMetadataKeys     int           // per session
	MaxMetadataKeyLen   int           // bytes
	MaxMetadataValueLen int           // bytes
	MaxInputBytes       int           // run input
	MaxMemoryEntries    int           // per session
	MaxMemoryValueBytes int           // one value's JSON text
	ToolConcurrency     int           // tool calls of one model turn run at once
	MaxQueued           int           // inputs waiting for a session's active run
	ToolTimeout         time.Duration // one tool call
	IdempotencyWindow   time.Duration // how long an Idempotency-Key is remembered
}

// DefaultLimits returns the limits kerneld uses unless configured otherwise.
func DefaultLimits() Limits {
	return Limits{
		MaxNameLength:       256,
		MaxMetadataKeys:     64,
		MaxMetadataKeyLen:   64,
		MaxMetadataValueLen: 512,
		MaxInputBytes:       256 << 10,
		MaxMemoryEntries:    256,
		MaxMemoryValueBytes: 64 << 10,
		ToolConcurrency:     4,
		MaxQueued:           8,
		ToolTimeout:         2 * time.Minute,
		IdempotencyWindow:   24 * time.Hour,
	}
}

// Config is what New needs. Agents, Tools and Store are required.
type Config struct {
	Agents    *agents.Registry
	Tools     *tools.Registry
	Store     Store
	Observers []Observer // see every event after it is durable, in order
	Logger    *slog.Logger
	Now       func() time.Time // defaults to time.Now
	Limits    Limits           // zero fields take DefaultLimits values
	Retention Retention        // zero fields take their defaults
	// MCP tunes how the agents' MCP servers are started and restarted;
	// the kernel owns the servers and stops them on Close.
	MCP mcp.Options
}

// Kernel owns all live runs and the goroutines that execute them.
type Kernel struct {
	agents    *agents.Registry
	tools     *tools.Registry
	store     Store
	observers []Observer
	log       *slog.Logger
	now       func() time.Time
	limits    Limits
	retention Retention
	mcp       *mcp.Manager // the agents' MCP servers, shared by every run

	ctx    context.Context // parent of every run; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per run goroutine

	mu     sync.Mutex
	closed bool                  // Close was called; new runs are refused
	active map[string]*activeRun // by session id: the run executing now

	// sessionLocks serialise read-modify-write of one session's record
	// (state, active run, name, metadata). Striped so memory stays bounded
	// however many sessions exist; unrelated sessions rarely share a stripe.
	sessionLocks [256]sync.Mutex
	lockSeed     maphash.Seed
}

// activeRun is a run whose goroutine is executing.
type activeRun struct {
	runID  string
	ctx    context.Context // the run's own context, child of Kernel.ctx
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the run has ended and been recorded
	// ending is set just before the run emits its terminal event: from then
	// on a new run for the session waits for done instead of being refused,
	// since a client may post the moment it sees RUN_FINISHED.
	ending atomic.Bool

	// Guarded by Kernel.mu:
	events  *eventWriter    // nil until the run has logged RUN_STARTED
	queue   []queuedRun     // runs waiting for this one to end, in order
	steered []string        // inputs to add before the run's next model call
	notices []session.Event // to log once the run has started
	first   session.Run     // the queued run it was created for (resumeQueues)

	awaiting  map[string]bool // tool calls waiting for a person's decision
	decisions chan decision   // Decide → the run goroutine; buffered for every awaited call

	resuming bool // a run waiting for approvals, resumed after a restart
}

// newActiveRun returns the active-run record of run runID, whose context
// the kernel's Close cancels.
func (k *Kernel) newActiveRun(runID string) *activeRun {
	ctx, cancel := context.WithCancelCause(k.ctx)
	return &activeRun{runID: runID, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// finished releases ar's resources and wakes whoever waits for its end.
func (ar *activeRun) finished() {
	ar.cancel(nil)
	close(ar.done)
}

// New returns a kernel. Call Close to stop it.
func New(cfg Config) (*Kernel, error) {
	if cfg.Agents == nil || cfg.Tools == nil || cfg.Store == nil {
		return nil, errors.New("kernel: agents, tools and store are required")
	}
	k := &Kernel{
		agents:    cfg.Agents,
		tools:     cfg.Tools,
		store:     cfg.Store,
		observers: cfg.Observers,
		log:       cfg.Logger,
		limits:    withDefaults(cfg.Limits),
		retention: cfg.Retention.withDefaults(),
		active:    make(map[string]*activeRun),
		lockSeed:  maphash.MakeSeed(),
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if cfg.MCP.Logger == nil {
		cfg.MCP.Logger = k.log
	}
	k.mcp = mcp.NewManager(cfg.MCP)
	clock := cfg.Now
	if clock == nil {
		clock = time.Now
	}
	// Microseconds are what every store keeps: an event must read the same
	// live as when it is replayed from the log after a restart.
	k.now = func() time.Time { return clock().UTC().Truncate(time.Microsecond) }
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.wg.Go(k.sweepLoop)
	return k, nil
}

// withDefaults fills the zero fields of l from DefaultLimits.
func withDefaults(l Limits) Limits {
	d := DefaultLimits()
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.MaxNameLength, d.MaxNameLength)
	fill(&l.MaxMetadataKeys, d.MaxMetadataKeys)
	fill(&l.MaxMetadataKeyLen, d.MaxMetadataKeyLen)
	fill(&l.MaxMetadataValueLen, d.MaxMetadataValueLen)
	fill(&l.MaxInputBytes, d.MaxInputBytes)
	fill(&l.MaxMemoryEntries, d.MaxMemoryEntries)
	fill(&l.MaxMemoryValueBytes, d.MaxMemoryValueBytes)
	fill(&l.ToolConcurrency, d.ToolConcurrency)
	fill(&l.MaxQueued, d.MaxQueued)
	if l.ToolTimeout <= 0 {
		l.ToolTimeout = d.ToolTimeout
	}
	if l.IdempotencyWindow <= 0 {
		l.IdempotencyWindow = d.IdempotencyWindow
	}
	return l
}

// Close refuses new runs, cancels the running ones (they end as
// interrupted, closing everything they opened), stops the retention
// sweeper and waits for all of them, or for ctx to end. Then it stops the
// MCP servers, which the runs no longer need.
func (k *Kernel) Close(ctx context.Context) error {
	k.mu.Lock()
	k.closed = true
	for _, ar := range k.active {
		ar.cancel(errShutdown)
	}
	k.mu.Unlock()
	k.cancel()
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	select {
	case <-done:
		return k.mcp.Close(ctx)
	case <-ctx.Done():
		// Stop the servers even so: a server left behind outlives kerneld
		// in a process group of its own. Stopping one is bounded (a few
		// seconds for a server that ignores its stdin closing).
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpStopGrace)
		defer cancel()
		return errors.Join(fmt.Errorf("close kernel: %w", ctx.Err()), k.mcp.Close(mctx))
	}
}

// mcpStopGrace bounds stopping the MCP servers once Close's own deadline
// has passed.
const mcpStopGrace = 5 * time.Second

// checkOpen returns ErrUnavailable once Close has been called.
func (k *Kernel) checkOpen() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.checkOpenLocked()
}

func (k *Kernel) checkOpenLocked() error {
	if k.closed {
		return errdefs.New(errdefs.ErrUnavailable, "shutting_down", "kerneld is shutting down")
	}
	return nil
}

// Ready reports whether the kernel can serve: not closing, store reachable.
func (k *Kernel) Ready(ctx context.Context) error {
	if err := k.checkOpen(); err != nil {
		return err
	}
	if err := k.store.Ping(ctx); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "store_unavailable", "store is unavailable")
	}
	return nil
}

// Agents returns every agent definition, sorted by name.
func (k *Kernel) Agents() []agents.Spec { return k.agents.List() }

// Agent returns the named agent definition.
func (k *Kernel) Agent(name string) (agents.Spec, error) { return k.agents.Get(name) }

// lockSession locks the stripe guarding session id's record and returns
// the unlock function.
func (k *Kernel) lockSession(id string) func() {
	m := &k.sessionLocks[maphash.String(k.lockSeed, id)%uint64(len(k.sessionLocks))]
	m.Lock()
	return m.Unlock
}

// emit stamps evs as events of run runID in session sessionID and appends
// them; running runs go through their eventWriter instead.
func (k *Kernel) emit(ctx context.Context, sessionID, runID string, evs ...session.Event) error {
	now := k.now()
	for i := range evs {
		evs[i].SessionID, evs[i].RunID, evs[i].Time = sessionID, runID, now
	}
	return k.append(ctx, evs)
}

// append makes evs durable (assigning seqs in place), then hands them to
// the observers: nobody sees an event the log could still lose.
func (k *Kernel) append(ctx context.Context, evs []session.Event) error {
	if err := k.store.AppendEvents(ctx, evs); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	for _, o := range k.observers {
		o.ObserveEvents(evs)
	}
	return nil
}

// validID reports whether id could be one kerneld issued, so malformed path
// ids answer not-found without touching the store.
func validID(id string) bool { return session.ValidID(id) }
