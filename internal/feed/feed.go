// Package feed keeps each tenant's session feed: one durable entry per
// change a chat product's sidebar shows (a session created, renamed,
// titled, its status changed, a run ended, an approval asked or decided,
// a session closed or deleted), each with the session's summary as it
// was then. The entries live in the store, so every replica serves every
// tenant's feed; the feed is bounded (Options.Keep entries per tenant).
//
// The kernel tells the Service what changed (kernel.FeedSink) and shows it
// what it emits (kernel.Observer); neither call blocks: a goroutine the
// Service owns reads the summary and appends the entry. It holds no HTTP.
package feed

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// Log is what the feed needs from a store.
type Log interface {
	// AppendFeed appends e to its tenant's feed, assigning e.Seq, and
	// drops the entries more than keep older than it.
	AppendFeed(ctx context.Context, e *session.FeedEntry, keep int) error
	// ReadFeed returns tenant's entries with seq > after, oldest first.
	ReadFeed(ctx context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error)
	// FeedHead returns the newest seq of tenant's feed, 0 for none.
	FeedHead(ctx context.Context, tenant string) (int64, error)
}

// Kinds the Service reads from the events the kernel emits; the others
// are kernel.FeedKind's.
const (
	KindStatus            kernel.FeedKind = "session.status"
	KindRunEnded          kernel.FeedKind = "run.ended"
	KindApprovalRequested kernel.FeedKind = "approval.requested"
	KindApprovalDecided   kernel.FeedKind = "approval.decided"
	// KindCleared says the session's history was emptied in place: a
	// client showing its conversation starts it anew.
	KindCleared kernel.FeedKind = "session.cleared"
)

// Defaults of the zero Options fields.
const (
	DefaultKeep  = 10000
	DefaultQueue = 4096
)

// Summarizer returns the summary of the session stored under id, with
// its tenant: the kernel's FeedSummary.
type Summarizer func(ctx context.Context, id string) (kernel.FeedSummary, error)

// Options configure a Service.
type Options struct {
	Log    Log
	Keep   int // entries kept per tenant; DefaultKeep when zero
	Queue  int // changes waiting for the appender; DefaultQueue when zero
	Logger *slog.Logger
	Now    func() time.Time
}

// Service appends the feed's entries and wakes the streams that follow it.
type Service struct {
	opts      Options
	summarize Summarizer
	changes   chan change
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu    sync.Mutex
	wakes map[string]chan struct{} // by tenant: closed at its next append here
}

// change is one change waiting to be appended.
type change struct {
	tenant, id string // tenant "" when only the kernel's summary knows it
	kind       kernel.FeedKind
	last       *session.Session // a deleted session's last record
	// hint is the status the event that made the change gives its
	// session: its record catches up just after the event.
	hint session.Status
}

// New returns a Service; Start starts its appender.
func New(opts Options) *Service {
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{opts: opts, changes: make(chan change, opts.Queue), ctx: ctx, cancel: cancel, wakes: map[string]chan struct{}{}}
}

// Start starts the appender, which reads summaries with summarize.
func (s *Service) Start(summarize Summarizer) {
	s.summarize = summarize
	s.wg.Go(s.appendLoop)
}

// Close stops the appender once it has appended what was queued, or
// when ctx ends.
func (s *Service) Close(ctx context.Context) error {
	close(s.changes)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-done
		return ctx.Err()
	}
}

// SessionChanged implements kernel.FeedSink.
func (s *Service) SessionChanged(tenant, id string, kind kernel.FeedKind, last *session.Session) {
	s.enqueue(change{tenant: tenant, id: id, kind: kind, last: last})
}

// ObserveEvents implements kernel.Observer: the events that change what
// a sidebar shows become changes.
func (s *Service) ObserveEvents(evs []session.Event) {
	for i := range evs {
		if kind, hint := kindOf(&evs[i]); kind != "" {
			s.enqueue(change{id: evs[i].SessionID, kind: kind, hint: hint})
		}
	}
}

// ObserveSessionEnded implements kernel.Observer; the kernel reports
// closes and deletes itself.
func (s *Service) ObserveSessionEnded(string, int64) {}

// kindOf is the change ev makes to its session's summary, if any, and
// the status it gives the session.
func kindOf(ev *session.Event) (kernel.FeedKind, session.Status) {
	switch ev.Type {
	case session.EventRunStarted:
		return KindStatus, session.StatusRunning
	case session.EventRunFinished:
		return KindRunEnded, session.StatusIdle
	case session.EventRunError:
		return KindRunEnded, session.StatusFailed
	case session.EventCustom:
		switch ev.Member("name") {
		case "kerneld.approval.requested":
			return KindApprovalRequested, session.StatusWaitingInput
		case "kerneld.approval.resolved":
			return KindApprovalDecided, ""
		case session.CustomRunStalled:
			return KindStatus, session.StatusStalled
		case "kerneld.run.queued":
			return KindStatus, ""
		case session.CustomSessionCleared:
			return KindCleared, ""
		}
	}
	return "", ""
}

// enqueue hands c to the appender without waiting: a full queue drops it
// (logged), as a slow stream is dropped, rather than stall a run.
func (s *Service) enqueue(c change) {
	defer func() { _ = recover() }() // a change after Close is dropped
	select {
	case s.changes <- c:
	default:
		s.opts.Logger.Warn("feed queue full, change dropped", "session", c.id, "kind", string(c.kind))
	}
}

// appendLoop appends the queued changes in order until Close.
func (s *Service) appendLoop() {
	for c := range s.changes {
		if err := s.appendChange(c); err != nil {
			s.opts.Logger.Warn("append feed entry", "session", c.id, "kind", string(c.kind), "err", err)
		}
	}
}

// appendChange appends c with the session's summary now.
func (s *Service) appendChange(c change) error {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	var sum kernel.FeedSummary
	if c.last != nil {
		sum = kernel.SummaryOf(*c.last)
		sum.Status = session.StatusClosed
	} else {
		var err error
		if sum, err = s.summarize(ctx, c.id); err != nil {
			return err
		}
	}
	if c.hint != "" && c.kind != KindStatus && (sum.Status == session.StatusRunning || sum.Status == session.StatusStalled) {
		sum.Status = c.hint // the record moves on just after the event
	}
	data, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	e := session.FeedEntry{Tenant: sum.Tenant, SessionID: c.id, Kind: string(c.kind), Time: s.opts.Now().UTC(), Data: data}
	if err := s.opts.Log.AppendFeed(ctx, &e, s.opts.Keep); err != nil {
		return err
	}
	s.wake(e.Tenant)
	return nil
}

// wake wakes the streams of tenant waiting in Wait.
func (s *Service) wake(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.wakes[tenant]; ok {
		close(ch)
		delete(s.wakes, tenant)
	}
}

// Wait returns a channel closed at tenant's next append on this replica.
// Appends on other replicas are found by reading the log.
func (s *Service) Wait(tenant string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.wakes[tenant]
	if !ok {
		ch = make(chan struct{})
		s.wakes[tenant] = ch
	}
	return ch
}

// Read returns tenant's entries after seq after, at most limit.
func (s *Service) Read(ctx context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error) {
	return s.opts.Log.ReadFeed(ctx, tenant, after, limit)
}

// Head returns the newest seq of tenant's feed.
func (s *Service) Head(ctx context.Context, tenant string) (int64, error) {
	return s.opts.Log.FeedHead(ctx, tenant)
}
