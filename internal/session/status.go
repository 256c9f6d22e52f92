package session

import "time"

// Status is what a session or run is doing, derived for clients from its
// state, its queue and its log: the badge a list shows. It is never
// stored.
type Status string

// Statuses. Stalled is a running run, or its session, whose log has had
// no event for the stall time; Queued a session whose next run waits to
// start while none runs.
const (
	StatusIdle         Status = "idle"
	StatusRunning      Status = "running"
	StatusWaitingInput Status = "waiting_input"
	StatusQueued       Status = "queued"
	StatusStalled      Status = "stalled"
	StatusFailed       Status = "failed"
	StatusClosed       Status = "closed"
)

// CustomRunStalled is the CUSTOM event a run's stream gets, once, when the
// run has logged nothing for the stall time.
const CustomRunStalled = "kerneld.run.stalled"

// StatusOf is a session's status from its record alone: stalled and
// queued need its log and its queue (see the kernel's statuses).
func StatusOf(s *Session) Status {
	switch s.State {
	case StateClosed:
		return StatusClosed
	case StateRunning:
		return StatusRunning
	case StateWaitingInput:
		return StatusWaitingInput
	case StateError:
		return StatusFailed
	}
	return StatusIdle
}

// RunStatusOf is a run's status from its record alone: stalled needs its
// log. A run that ended is idle, unless it failed or was interrupted.
func RunStatusOf(r *Run) Status {
	switch r.State {
	case RunQueued:
		return StatusQueued
	case RunRunning:
		return StatusRunning
	case RunWaitingInput:
		return StatusWaitingInput
	case RunFailed, RunInterrupted:
		return StatusFailed
	}
	return StatusIdle
}

// Stalls reports whether a running run whose newest logged event is last
// is stalled at now: last is its stall notice, or older than after.
func Stalls(last *Event, now time.Time, after time.Duration) bool {
	if last == nil || last.Type.Ends() {
		return false
	}
	if last.Type == EventCustom && last.Member("name") == CustomRunStalled {
		return true
	}
	return after > 0 && now.Sub(last.Time) >= after
}
