package session

import (
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// RunState is where a run is in its life.
type RunState string

// Run states. Succeeded, failed, cancelled and interrupted are terminal.
const (
	RunQueued       RunState = "queued"
	RunRunning      RunState = "running"
	RunWaitingInput RunState = "waiting_input"
	RunSucceeded    RunState = "succeeded"
	RunFailed       RunState = "failed"
	RunCancelled    RunState = "cancelled"
	RunInterrupted  RunState = "interrupted"
)

var runTransitions = map[RunState][]RunState{
	RunQueued:       {RunRunning, RunCancelled},
	RunRunning:      {RunWaitingInput, RunSucceeded, RunFailed, RunCancelled, RunInterrupted},
	RunWaitingInput: {RunRunning, RunFailed, RunCancelled, RunInterrupted},
	RunSucceeded:    nil,
	RunFailed:       nil,
	RunCancelled:    nil,
	RunInterrupted:  nil,
}

// Valid reports whether s is a known run state.
func (s RunState) Valid() bool {
	_, ok := runTransitions[s]
	return ok
}

// Terminal reports whether a run in state s has ended for good.
func (s RunState) Terminal() bool { return s.Valid() && len(runTransitions[s]) == 0 }

// CanBecome reports whether a run in state s may move to state to.
func (s RunState) CanBecome(to RunState) bool {
	for _, next := range runTransitions[s] {
		if next == to {
			return true
		}
	}
	return false
}

// Usage counts the tokens a run's model calls consumed.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// RunError says why a run failed. Code is one of the RUN_ERROR codes.
type RunError struct {
	Code    string
	Message string
}

// RUN_ERROR codes.
const (
	ErrorCodeInterrupted = "interrupted" // the process stopped under the run
	ErrorCodeTimeout     = "timeout"
	ErrorCodeMaxTurns    = "max_turns"
	ErrorCodeModel       = "model_error"
	ErrorCodeInternal    = "internal"
)

// Run is one agent turn: from the user's input to the agent's answer,
// with every model and tool call in between.
type Run struct {
	ID             string
	SessionID      string
	State          RunState
	Input          string
	IdempotencyKey string
	CreatedAt      time.Time
	StartedAt      time.Time // zero until the run leaves the queue
	EndedAt        time.Time // zero until the run ends
	Error          *RunError
	Usage          Usage
	StartSeq       int64 // seq of its RUN_STARTED
	EndSeq         int64 // seq of its RUN_FINISHED or RUN_ERROR
	Version        int64 // optimistic concurrency, as Session.Version
}

// Transition moves r to state to at time now, or reports why it cannot.
func (r *Run) Transition(to RunState, now time.Time) error {
	if !r.State.CanBecome(to) {
		return errdefs.New(errdefs.ErrConflict, "invalid_transition",
			"run %s cannot go from %s to %s", r.ID, r.State, to)
	}
	r.State = to
	switch {
	case to == RunRunning && r.StartedAt.IsZero():
		r.StartedAt = now
	case to.Terminal():
		r.EndedAt = now
	}
	return nil
}
