package kernel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/kerneld/kerneld/internal/session"
)

// activeRun is the run a held session is executing, from its start (or
// its continuation) to the moment its goroutine stops. Its goroutine is
// the only writer of its events: others ask it to log theirs through
// notices.
type activeRun struct {
	run    session.Run // as it started; the run goroutine keeps its own copy
	tenant string      // the session's, whose quotas the run counts against
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the run's goroutine has stopped
	// continues says the run is continued, not ended, when its process
	// stops under it (its agent's on_crash).
	continues bool
	// ending is set just before the run emits its terminal event: from
	// then on a steer can no longer join it.
	ending atomic.Bool
	// endLogged is set once the run's terminal event is in the log, a
	// moment before its record says it ended (see awaitRecordedEnd).
	endLogged atomic.Bool
	// paused is set once the run has stopped because the store refused its
	// writes: until it goes on, its session refuses what would need them
	// (see outage.go).
	paused atomic.Bool
	// leave is closed to ask the run to stop at its next step boundary and
	// be continued elsewhere: its process is shutting down.
	leave     chan struct{}
	leaveOnce sync.Once
	// stop says how the run's goroutine stopped; set before done closes.
	stop runStop
	// notices are the events others ask the run to log (see mailbox).
	notices *mailbox
	events  *eventWriter
	// logged is the seq of the last event logged for the run before its
	// goroutine began: its start, or what its continuation logged.
	logged int64
	// started is set for a run whose start was just logged: its goroutine
	// records the rest of the start first (see runstart.go).
	started *startRecord
	// from is set for a run continued from what another process left
	// (see runcontinue.go).
	from *continuation

	// Guarded by held.mu:
	steers    []session.Run   // queued steers handed to the run, to join its next model call
	awaiting  map[string]bool // tool calls waiting for a person's decision
	decisions chan decision   // decisions for awaited calls, buffered for all of them
}

// runStop is how a run's goroutine stopped on this process.
type runStop int

const (
	// runEnded: it logged its end and recorded it (or tried to).
	runEnded runStop = iota
	// runLeft: it stopped unfinished, to be continued by whoever takes
	// the session next (a shutdown, or a lease lost: see runcontinue.go).
	runLeft
	// runPaused: it stopped unfinished because the store refused its
	// writes; its session's driver continues it once the store answers.
	runPaused
)

// newActiveRun returns the record of run, whose context stops with the
// session's (a shutdown cut, a lost lease).
func newActiveRun(h *held, s session.Session, run session.Run, continues bool) *activeRun {
	ctx, cancel := context.WithCancelCause(h.ctx)
	return &activeRun{run: run, tenant: s.Tenant, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		continues: continues, leave: make(chan struct{}), notices: newMailbox()}
}

// askToLeave asks the run to stop at its next step boundary, to be
// continued by another process.
func (ar *activeRun) askToLeave() { ar.leaveOnce.Do(func() { close(ar.leave) }) }

// leaving reports whether the run was asked to leave.
func (ar *activeRun) leaving() bool {
	select {
	case <-ar.leave:
		return true
	default:
		return false
	}
}

// current returns the session's active run, or nil.
func (h *held) current() *activeRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active
}

// mailbox holds the events others ask a run to log: the session's driver
// (a queued run's notice), the stall watch, a tool call that spawned a
// child. Posting never blocks the poster; the run's goroutine takes them
// at its next wait (a model stream, a batch of tool calls) or step, and
// before its end. Once the run ends, posts are refused, as nothing may be
// logged after a run's terminal event.
type mailbox struct {
	mu     sync.Mutex
	evs    []session.Event
	closed bool
	wake   chan struct{} // a token when evs became non-empty
}

func newMailbox() *mailbox { return &mailbox{wake: make(chan struct{}, 1)} }

// post queues evs for the run and reports whether it took them.
func (m *mailbox) post(evs ...session.Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.evs = append(m.evs, evs...)
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns what was posted since the last take.
func (m *mailbox) take() []session.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := m.evs
	m.evs = nil
	return evs
}

// close returns what is left and refuses later posts.
func (m *mailbox) close() []session.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	evs := m.evs
	m.evs = nil
	return evs
}
