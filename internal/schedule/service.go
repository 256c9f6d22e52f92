package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Runner posts a schedule's input to its session. The kernel implements
// it (wired in cmd/kerneld); tests fake it.
type Runner interface {
	// Run posts req and returns the run it started or queued. A busy
	// session refused under the busy policy is ErrConflict
	// (session_busy), a full queue ErrExhausted, a session gone
	// ErrNotFound (session_not_found) or closed ErrConflict
	// (session_closed); ErrUnavailable says to try again later.
	Run(ctx context.Context, req RunRequest) (RunResult, error)
}

// RunRequest is one firing's run.
type RunRequest struct {
	Tenant    string
	SessionID string
	Input     string
	// IfBusy is the kernel's busy policy: "reject" for IfBusySkip,
	// "queue" for IfBusyQueue.
	IfBusy string
	// Source is session.RunSourceSchedule.
	Source string
	// IdempotencyKey names the firing: a run posted again with it (after
	// a lost claim) is the first one.
	IdempotencyKey string
}

// RunResult is the run a firing posted.
type RunResult struct {
	RunID  string
	Queued bool // it waits behind the session's active run
}

// Limits bound what clients may schedule. Zero fields take
// DefaultLimits'.
type Limits struct {
	Bounds
	MinEvery      time.Duration // the shortest interval
	MaxAhead      time.Duration // how far ahead At may be, and the longest interval
	MaxInputBytes int
}

// DefaultLimits returns the limits kerneld uses unless configured
// otherwise: they bound abuse, and a reminder app never meets them.
func DefaultLimits() Limits {
	return Limits{Bounds: Bounds{PerSession: 32, PerTenant: 1000}, MinEvery: time.Minute,
		MaxAhead: 366 * 24 * time.Hour, MaxInputBytes: 256 << 10}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.PerSession <= 0 {
		l.PerSession = d.PerSession
	}
	if l.PerTenant <= 0 {
		l.PerTenant = d.PerTenant
	}
	if l.MinEvery <= 0 {
		l.MinEvery = d.MinEvery
	}
	if l.MaxAhead <= 0 {
		l.MaxAhead = d.MaxAhead
	}
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = d.MaxInputBytes
	}
	return l
}

// Options configure New. Store and Runner are required.
type Options struct {
	Store  Store
	Runner Runner
	Limits Limits
	// Holder names this replica in its claims; default a random name.
	Holder string
	// Poll is how often the Service looks for due schedules; default 1 s,
	// which is how late a schedule may fire.
	Poll time.Duration
	// ClaimTTL is how long a claim lasts, and so how long a schedule
	// whose replica died waits to be fired by another; default 30 s.
	ClaimTTL time.Duration
	// Batch bounds the schedules one pass claims; default 16.
	Batch  int
	Now    func() time.Time // default time.Now
	Logger *slog.Logger
}

// Service creates, lists and deletes schedules, and fires those due. Its
// methods are safe for concurrent use.
type Service struct {
	store  Store
	runner Runner
	limits Limits
	holder string
	poll   time.Duration
	ttl    time.Duration
	batch  int
	now    func() time.Time
	log    *slog.Logger

	ended chan string // sessions closed or deleted, for the loop to forget

	mu      sync.Mutex
	cancel  context.CancelFunc // of the loop; nil until Start
	stopped chan struct{}      // closed when the loop returns
}

// New returns a Service; Start starts its loop, Close stops it.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Runner == nil {
		return nil, errors.New("schedule: a store and a runner are required")
	}
	s := &Service{store: opts.Store, runner: opts.Runner, limits: opts.Limits.withDefaults(),
		holder: opts.Holder, poll: opts.Poll, ttl: opts.ClaimTTL, batch: opts.Batch, now: opts.Now,
		log: opts.Logger, ended: make(chan string, 256)}
	if s.holder == "" {
		s.holder = "schedules-" + session.NewMessageID()
	}
	if s.poll <= 0 {
		s.poll = time.Second
	}
	if s.ttl <= 0 {
		s.ttl = 30 * time.Second
	}
	if s.batch <= 0 {
		s.batch = 16
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Limits returns the limits the Service applies.
func (s *Service) Limits() Limits { return s.limits }

// Spec is what a client asks for: At, Every or both, the input and the
// busy policy ("" means IfBusySkip).
type Spec struct {
	At     time.Time
	Every  time.Duration
	Input  string
	IfBusy string
}

// Create adds a schedule to sess, which the caller has found for its
// tenant. A closed session takes none (ErrConflict session_closed).
func (s *Service) Create(ctx context.Context, sess session.Session, spec Spec) (Schedule, error) {
	now := s.clock()
	if err := s.check(spec, now); err != nil {
		return Schedule{}, err
	}
	if sess.State == session.StateClosed {
		return Schedule{}, errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionClosed, "session %s is closed", session.PublicID(sess.ID))
	}
	sch := Schedule{ID: session.NewID(), Tenant: sess.Tenant, SessionID: sess.ID, At: spec.At.UTC().Truncate(time.Microsecond),
		Every: spec.Every, Input: spec.Input, IfBusy: spec.IfBusy, CreatedAt: now}
	if sch.IfBusy == "" {
		sch.IfBusy = IfBusySkip
	}
	sch.NextAt = sch.At
	if sch.At.IsZero() {
		sch.NextAt = now.Add(sch.Every)
	}
	if err := s.store.CreateSchedule(ctx, sch, s.limits.Bounds); err != nil {
		return Schedule{}, err
	}
	return sch, nil
}

// check checks spec's shape and bounds at now.
func (s *Service) check(spec Spec, now time.Time) error {
	var v *errdefs.ValidationError
	switch {
	case spec.At.IsZero() && spec.Every == 0:
		v = v.Add("at", "at or every is required")
	case !spec.At.IsZero() && spec.At.After(now.Add(s.limits.MaxAhead)):
		v = v.Add("at", fmt.Sprintf("is more than %s ahead", s.limits.MaxAhead))
	}
	switch {
	case spec.Every < 0:
		v = v.Add("every", "must be positive")
	case spec.Every > 0 && spec.Every < s.limits.MinEvery:
		v = v.Add("every", fmt.Sprintf("must be at least %s", s.limits.MinEvery))
	case spec.Every > s.limits.MaxAhead:
		v = v.Add("every", fmt.Sprintf("must be at most %s", s.limits.MaxAhead))
	}
	switch {
	case spec.Input == "":
		v = v.Add("input", "required")
	case len(spec.Input) > s.limits.MaxInputBytes:
		v = v.Add("input", fmt.Sprintf("longer than %d bytes", s.limits.MaxInputBytes))
	case !utf8.ValidString(spec.Input):
		v = v.Add("input", "is not valid UTF-8")
	}
	if spec.IfBusy != "" && spec.IfBusy != IfBusySkip && spec.IfBusy != IfBusyQueue {
		v = v.Add("if_busy", `must be "skip" or "queue"`)
	}
	return v.Err()
}

// clock returns now as stores keep it: UTC, whole microseconds.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Get returns schedule id of session sessionID.
func (s *Service) Get(ctx context.Context, sessionID, id string) (Schedule, error) {
	return s.store.GetSchedule(ctx, sessionID, id)
}

// List returns the schedules of session sessionID, oldest first.
func (s *Service) List(ctx context.Context, sessionID string) ([]Schedule, error) {
	return s.store.ListSchedules(ctx, sessionID)
}

// Delete cancels schedule id of session sessionID. A firing already under
// way still posts its run.
func (s *Service) Delete(ctx context.Context, sessionID, id string) error {
	return s.store.DeleteSchedule(ctx, sessionID, id)
}
