// Package kernel is kerneld's multi-session runtime. It creates and loads
// sessions, accepts runs, drives the agent loop (model calls, tool calls,
// cancellation, limits) and emits every event through the event log and
// then its observers.
//
// The kernel is the one service internal/httpapi calls. It never imports
// net/http: transport concerns stay in httpapi, storage behind Store.
//
// # Who runs a session
//
// Several kernels (replicas) may share one store. A replica runs a
// session's runs only while it holds the session's lease, and every
// append it makes carries the lease's fencing token, so a replica that
// lost its lease can never write to the session again. The owner type
// (owner.go) is this replica's share: the sessions whose lease it holds,
// each with one driver goroutine (drive.go) that starts the session's
// runs, one at a time, in the order they were posted, and applies what
// clients ask of them. A store used by one process grants leases from
// memory; nothing else differs.
//
// The store is the truth. A request, on whichever replica it arrives,
// writes what it wants into the store (a queued run, a cancel request, an
// approval decision, a closed session) and signals the session's owner, or
// takes the lease and becomes the owner when nobody holds it. An owner
// re-reads the store when signalled and, when replicas share the store,
// every CheckInterval too, so a lost signal delays a request but never
// loses it. A replica that finds a session with runs but no live lease (its
// owner died, or let it go at shutdown) takes it over (recover.go): the
// run left unfinished is continued from its last completed step, and the
// queued ones start.
//
// # A run's life
//
// Each phase of a run lives in one file: it starts (runstart.go), runs its
// steps on a goroutine of its own (loop.go), and either ends
// (runend.go) or, when its process stops under it, is left and later
// continued by whoever takes its session (runcontinue.go). The run's
// goroutine is the only writer of its events; others (the driver's
// notices, the stall watch, a tool call's child) post theirs to it
// (activerun.go's mailbox).
//
// # Locks
//
// In the order they are taken; a lock may be taken while holding those
// above it, never those below:
//
//  0. A tenant's session admission (Quotas.AdmitSession, see admit.go)
//     serialises the tenant's session creations, across replicas, from
//     the count of its sessions to the insert of the new one.
//  1. Kernel.sessionLocks (striped by session id) serialise changes to one
//     session's record, and taking its lease, within this process. They
//     and the admission are the only locks held across store calls.
//  2. owner.mu guards the map of held sessions.
//  3. held.mu guards one held session's driver state: its active run and
//     what the driver has seen of its queue.
//  4. eventWriter.mu guards one run's pending events; mailbox.mu guards
//     the events posted to one run. Neither is held while taking the
//     other.
//  5. sessionServers.mu guards which sessions' own MCP servers may run
//     here (sessionmcp.go); nothing is taken while holding it.
//
// No lock is held while calling a model, a tool or an observer, or while
// blocking on a channel.
package kernel

import (
	"cmp"
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
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/telemetry"
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
	// SessionMCP configures the MCP servers clients attach to sessions
	// (sessionmcp.go).
	SessionMCP SessionMCP
	// Replication configures a kernel that shares Store with other
	// replicas; the zero value is one process alone.
	Replication Replication
	// Quotas counts the tenants' runs and model tokens; nil counts none.
	Quotas Quotas
	// StallAfter is how long a running run may log nothing before it is
	// stalled (see session.StatusStalled); default DefaultStallAfter.
	StallAfter time.Duration
	// Titles says how sessions are titled after their first run.
	Titles Titles
	// Feed, when set, records changes to sessions in their tenant's feed.
	Feed FeedSink
	// Announcer, when set, is told of what webhooks announce.
	Announcer Announcer
	// Guards, when set, asks the agents' guards about tool calls and runs.
	Guards Guards
	// Tracing traces runs (see tracing.go); nil traces nothing.
	Tracing *telemetry.Tracing
	// Images keeps the images of users' messages and loads them for the
	// model calls that send them; nil keeps none, so an input with images
	// is refused (see images.go).
	Images *images.Library
}

// Kernel owns the runs of the sessions this replica holds and the
// goroutines that execute them.
type Kernel struct {
	agents    *agents.Registry
	tools     *tools.Registry
	store     Store
	observers []Observer
	log       *slog.Logger
	now       func() time.Time
	limits    Limits
	retention Retention
	repl      Replication
	// stallAfter is when a quiet running run counts as stalled.
	stallAfter time.Duration
	mcp        *mcp.Manager // the agents' MCP servers, shared by every run, and the sessions' own
	sessionMCP *sessionServers
	quotas     Quotas
	titles     Titles
	feed       FeedSink
	announcer  Announcer // nil: nothing is announced
	guards     Guards    // nil: agents' guards are not asked
	tracing    *telemetry.Tracing
	images     *images.Library

	ctx    context.Context // parent of every run; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // drivers, runs, the sweeper and the owner's loops
	closed atomic.Bool    // Close was called; new runs are refused

	owner   *owner   // the sessions this replica holds
	changes *changes // wakes whoever waits on a session's stored state

	// sessionLocks serialise read-modify-write of one session's record and
	// taking its lease within this process. Striped so memory stays bounded
	// however many sessions exist; unrelated sessions rarely share a stripe.
	sessionLocks [256]sync.Mutex
	lockSeed     maphash.Seed
}

// New returns a kernel. Call Recover once, then serve; Drain, then Close,
// stop it.
func New(cfg Config) (*Kernel, error) {
	if cfg.Agents == nil || cfg.Tools == nil || cfg.Store == nil {
		return nil, errors.New("kernel: agents, tools and store are required")
	}
	k := &Kernel{
		agents:     cfg.Agents,
		tools:      cfg.Tools,
		store:      cfg.Store,
		observers:  cfg.Observers,
		log:        cfg.Logger,
		limits:     withDefaults(cfg.Limits),
		retention:  cfg.Retention.withDefaults(),
		repl:       cfg.Replication.withDefaults(),
		stallAfter: cmp.Or(cfg.StallAfter, DefaultStallAfter),
		lockSeed:   maphash.MakeSeed(),
		changes:    newChanges(),
		quotas:     cfg.Quotas,
		titles:     cfg.Titles,
		feed:       cfg.Feed,
		announcer:  cfg.Announcer,
		guards:     cfg.Guards,
		tracing:    cfg.Tracing,
		images:     cfg.Images,
	}
	if k.images == nil {
		k.images = images.New(nil, images.Limits{}, nil)
	}
	if k.tracing == nil {
		k.tracing = telemetry.Disabled()
	}
	if k.quotas == nil {
		k.quotas = noQuotas{}
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if cfg.MCP.Logger == nil {
		cfg.MCP.Logger = k.log
	}
	k.mcp = mcp.NewManager(cfg.MCP)
	k.sessionMCP = newSessionServers(cfg.SessionMCP)
	clock := cfg.Now
	if clock == nil {
		clock = time.Now
	}
	// Microseconds are what every store keeps: an event must read the same
	// live as when it is replayed from the log after a restart.
	k.now = func() time.Time { return clock().UTC().Truncate(time.Microsecond) }
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.owner = newOwner(k)
	k.wg.Go(k.sweepLoop)
	k.wg.Go(k.owner.renewLoop)
	k.wg.Go(k.stallLoop)
	k.wg.Go(k.sessionMCPLoop)
	if k.repl.Signals != nil {
		k.wg.Go(k.owner.takeOverLoop)
	}
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

// checkOpen returns ErrUnavailable once Close has been called.
func (k *Kernel) checkOpen() error {
	if k.closed.Load() {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeShuttingDown, "kerneld is shutting down")
	}
	return nil
}

// Ready reports whether the kernel can serve: not closing, store reachable
// and taking the writes of the runs here (none is paused for it).
func (k *Kernel) Ready(ctx context.Context) error {
	if err := k.checkOpen(); err != nil {
		return err
	}
	if err := k.store.Ping(ctx); err != nil || k.owner.pausedRuns() {
		return errdefs.New(errdefs.ErrUnavailable, errdefs.CodeStoreUnavailable, "store is unavailable")
	}
	return nil
}

// Agents returns every agent definition, sorted by name.
func (k *Kernel) Agents() []agents.Spec { return k.agents.List() }

// Agent returns the named agent definition.
func (k *Kernel) Agent(name string) (agents.Spec, error) { return k.agents.Get(name) }

// lockSession locks the stripe guarding session id's record and lease and
// returns the unlock function.
func (k *Kernel) lockSession(id string) func() {
	m := &k.sessionLocks[maphash.String(k.lockSeed, id)%uint64(len(k.sessionLocks))]
	m.Lock()
	return m.Unlock
}

// emit stamps evs as events of run runID in session sessionID and appends
// them with the session's lease token; running runs go through their
// eventWriter instead.
func (k *Kernel) emit(ctx context.Context, token int64, sessionID, runID string, evs ...session.Event) error {
	now := k.now()
	for i := range evs {
		evs[i].SessionID, evs[i].RunID, evs[i].Time = sessionID, runID, now
	}
	return k.append(ctx, token, evs)
}

// append makes evs durable (assigning seqs in place), then hands them to
// the observers: nobody sees an event the log could still lose. It is the
// only caller of AppendEvents; token is the lease of evs' session.
func (k *Kernel) append(ctx context.Context, token int64, evs []session.Event) error {
	announced := k.announceEvents(ctx, evs)
	if err := k.store.AppendEvents(ctx, token, evs); err != nil {
		if errors.Is(err, session.ErrFenced) {
			k.owner.fenced.Add(1)
		}
		return fmt.Errorf("append events: %w", err)
	}
	k.observe(evs)
	if announced {
		k.announcer.Notify()
	}
	return nil
}

// observe hands durable events to the observers.
func (k *Kernel) observe(evs []session.Event) {
	for _, o := range k.observers {
		o.ObserveEvents(evs)
	}
}

// validID reports whether id could be one kerneld issued, so malformed path
// ids answer not-found without touching the store.
func validID(id string) bool { return session.ValidID(id) }
