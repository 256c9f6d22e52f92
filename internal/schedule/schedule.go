// Package schedule owns scheduled prompts: inputs that kerneld posts to a
// session itself, once at a time or every interval, as a client would,
// with the busy policy the schedule names (skip a busy session, or queue
// behind its run).
//
// Schedules are durable in a Store the package declares (memory, SQLite
// and Redis implement it; storetest.RunSchedules holds them to one
// behaviour). Each replica runs a Service, and every due schedule is fired
// by exactly one of them: a Service claims due schedules for a while, as a
// session's lease is held, fires them, and records the firing, which
// releases the claim; a claim whose holder died expires and another
// replica fires the schedule. A firing carries an idempotency key made of
// the schedule and its due time, so a firing repeated after a lost claim
// finds the run the first one posted. A schedule whose time passed while
// no replica ran fires once, late, and its next time is the first one
// still ahead: missed ticks are not made up.
//
// The package knows neither HTTP nor the kernel: it posts runs through a
// Runner, which the kernel's owner implements (cmd/kerneld), and httpapi
// serves its routes.
package schedule

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Busy policies of a schedule.
const (
	IfBusySkip  = "skip"  // a firing that finds the session running posts nothing
	IfBusyQueue = "queue" // it queues its input behind the active run
)

// Schedule is one scheduled prompt of a session.
type Schedule struct {
	ID        string
	Tenant    string
	SessionID string // the key the session is stored under
	// At is when it fires first; zero when it first fires Every after
	// its creation.
	At time.Time
	// Every is the time between firings; 0 for a schedule that fires
	// once, at At.
	Every     time.Duration
	Input     string
	IfBusy    string // IfBusySkip or IfBusyQueue
	NextAt    time.Time
	CreatedAt time.Time
	Fired     int64   // firings so far, whatever their outcome
	Last      *Firing // the latest firing; nil before the first

	// Claim is the fencing token of the latest claim, which ClaimDue
	// sets and FinishFiring checks; stores keep it beside the record.
	Claim int64
}

// Firing is what happened when a schedule fired.
type Firing struct {
	At      time.Time `json:"at"`      // when it fired
	DueAt   time.Time `json:"due_at"`  // the time it was due
	Outcome string    `json:"outcome"` // one of the Outcome values
	RunID   string    `json:"run_id,omitempty"`
	Error   string    `json:"error,omitempty"` // why it failed or was skipped
}

// Outcomes of a firing.
const (
	OutcomeStarted = "started" // its run started
	OutcomeQueued  = "queued"  // its run waits behind the session's active run
	OutcomeSkipped = "skipped" // the session was busy (if_busy skip) or its queue full
	OutcomeFailed  = "failed"  // the run could not be posted; Error says why
)

// Bounds are how many schedules a session and a tenant may have.
type Bounds struct {
	PerSession int
	PerTenant  int
}

// Store keeps schedules. It is declared here, by its consumer; the
// backends in internal/store implement it. Times keep microseconds.
type Store interface {
	// CreateSchedule stores s. A session that is missing is ErrNotFound
	// (session_not_found), an id it has already ErrConflict, and a
	// session or tenant holding its bound already ErrExhausted
	// (schedule_limit).
	CreateSchedule(ctx context.Context, s Schedule, b Bounds) error
	// GetSchedule returns schedule id of session sessionID, or
	// ErrNotFound (schedule_not_found).
	GetSchedule(ctx context.Context, sessionID, id string) (Schedule, error)
	// ListSchedules returns a session's schedules, oldest first.
	ListSchedules(ctx context.Context, sessionID string) ([]Schedule, error)
	// DeleteSchedule deletes schedule id of session sessionID, or answers
	// ErrNotFound (schedule_not_found).
	DeleteSchedule(ctx context.Context, sessionID, id string) error
	// DeleteSessionSchedules deletes every schedule of session sessionID,
	// which may be deleted already.
	DeleteSessionSchedules(ctx context.Context, sessionID string) error
	// ClaimDue claims for holder, until now+ttl, up to limit schedules
	// due at now (NextAt not after now) and not claimed by then, those
	// due first first, and returns them, each with the fencing token of
	// its new claim in Claim. A schedule stays claimed until
	// FinishFiring releases it or the claim expires.
	ClaimDue(ctx context.Context, holder string, now time.Time, ttl time.Duration, limit int) ([]Schedule, error)
	// FinishFiring records the firing of s, claimed with the token
	// s.Claim: it stores s's NextAt, Fired and Last and releases the
	// claim, or, when done, deletes s. A claim no longer held with s.Claim
	// (expired and taken, or s deleted) changes nothing and is
	// ErrClaimLost.
	FinishFiring(ctx context.Context, s Schedule, done bool) error
}

// ErrClaimLost says a schedule is no longer claimed with the token a
// firing holds.
var ErrClaimLost = errdefs.New(errdefs.ErrConflict, errdefs.CodeScheduleClaimLost, "the schedule's claim was lost")

// NotFound says session sessionID has no schedule id.
func NotFound(id string) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeScheduleNotFound, "schedule %s not found", id)
}

// LimitReached says a session or a tenant has all the schedules it may.
func LimitReached(whose string, n int) error {
	return errdefs.New(errdefs.ErrExhausted, errdefs.CodeScheduleLimit, "%s already has %d schedules, as many as it may", whose, n)
}

// Exists says a schedule id is taken.
func Exists(id string) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeScheduleExists, "schedule %s already exists", id)
}

// isClaimLost reports whether err is ErrClaimLost.
func isClaimLost(err error) bool { return errors.Is(err, ErrClaimLost) }

// Next returns when s fires after a firing due at due, at now: due plus
// the whole number of Every that first lands after now, so ticks missed
// while nothing ran are skipped, not made up; zero for a schedule that
// fires once.
func Next(s Schedule, due, now time.Time) time.Time {
	if s.Every <= 0 {
		return time.Time{}
	}
	next := due.Add(s.Every)
	if !next.After(now) {
		missed := now.Sub(due) / s.Every
		next = due.Add((missed + 1) * s.Every)
	}
	return next
}

// SortDue sorts schedules as ClaimDue returns them: due first, then by id.
func SortDue(schs []Schedule) {
	slices.SortFunc(schs, func(a, b Schedule) int {
		if c := a.NextAt.Compare(b.NextAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
