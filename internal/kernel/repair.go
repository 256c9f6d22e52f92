package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Repair actions: what Repair does to a session no replica runs.
const (
	RepairEndRun      = "end_run"      // a run left running: close what it opened, answer its tool calls, end it interrupted
	RepairRecordEnd   = "record_end"   // a run that ended in the log: record its end
	RepairFreeSession = "free_session" // the record says busy with no run unfinished: free it
	RepairStartQueued = "start_queued" // queued runs start, in order
)

// RepairAction is one thing Repair does, or would do.
type RepairAction struct {
	Kind   string
	RunID  string
	Detail string
}

// RepairReport says what Repair did, or would do on a dry run, and what
// it leaves: the problems recovery does not resolve.
type RepairReport struct {
	DryRun    bool
	Actions   []RepairAction
	Remaining []Problem
}

// Repair resolves what a session no replica runs was left with: runs
// left running end interrupted with valid histories (an operator asking
// for a repair asks for an end; startup recovery and take-over continue
// such runs instead), a record stuck busy is freed, queued runs start,
// and runs waiting for a decision wait again. A dry run only says what it
// would do. The session must not be running: Repair takes its lease, so a
// session another replica holds, or whose run this one executes, is a
// conflict.
func (k *Kernel) Repair(ctx context.Context, id string, dryRun bool) (RepairReport, error) {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return RepairReport{}, err
	}
	id = s.ID // the key it is stored under
	unlock := k.lockSession(id)
	h, fresh, err := k.owner.hold(ctx, id)
	unlock()
	switch {
	case errors.Is(err, session.ErrLeaseHeld) || (err == nil && !fresh):
		return RepairReport{}, errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionRunning,
			"session %s is running: repair applies to a session no replica runs", id)
	case err != nil:
		return RepairReport{}, err
	}
	report, err := k.repairPlan(ctx, id)
	report.DryRun = dryRun
	if err != nil || dryRun {
		k.owner.release(h)
		return report, err
	}
	if err := k.endRunning(ctx, h); err != nil {
		k.owner.release(h)
		return report, fmt.Errorf("repair session %s: %w", id, err)
	}
	if err := k.freeSession(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		k.owner.release(h)
		return report, err
	}
	k.owner.start(h) // starts what is queued, then lets the lease go
	return report, nil
}

// repairPlan says what recovery would do to session id, whose lease the
// caller holds, and which of Check's problems it would leave.
func (k *Kernel) repairPlan(ctx context.Context, id string) (RepairReport, error) {
	d, err := k.Check(ctx, id)
	if err != nil {
		return RepairReport{}, err
	}
	var report RepairReport
	for _, p := range d.Problems {
		if !p.Repairable {
			report.Remaining = append(report.Remaining, p)
		}
	}
	runs, err := k.store.ListRuns(ctx, id, session.RunQuery{})
	if err != nil {
		return report, fmt.Errorf("list runs: %w", err)
	}
	unfinished := false
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		r := runs[i]
		switch r.State {
		case session.RunRunning:
			a, err := k.endRunAction(ctx, r)
			if err != nil {
				return report, err
			}
			report.Actions = append(report.Actions, a)
		case session.RunQueued:
			report.Actions = append(report.Actions, RepairAction{Kind: RepairStartQueued, RunID: r.ID, Detail: "queued run " + r.ID + " starts in its turn"})
			unfinished = true
		case session.RunWaitingInput:
			unfinished = true // it waits for its decisions again
		}
	}
	s, err := k.store.GetSession(ctx, id)
	if err != nil {
		return report, fmt.Errorf("get session: %w", err)
	}
	busy := s.State == session.StateRunning || s.State == session.StateWaitingInput || s.ActiveRunID != ""
	if busy && !unfinished && !hasRunning(runs) {
		report.Actions = append(report.Actions, RepairAction{Kind: RepairFreeSession,
			Detail: fmt.Sprintf("the session's record says %s with no run unfinished: it becomes free", s.State)})
	}
	return report, nil
}

// endRunning ends, as interrupted, the runs of h's session left running.
func (k *Kernel) endRunning(ctx context.Context, h *held) error {
	runs, err := k.store.ListRuns(ctx, h.id, session.RunQuery{States: []session.RunState{session.RunRunning}})
	if err != nil {
		return fmt.Errorf("list running runs: %w", err)
	}
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		err := k.endLeft(ctx, h.token, runs[i], session.ErrorCodeInterrupted, interruptedMessage)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("end run %s: %w", runs[i].ID, err)
		}
	}
	return nil
}

// endRunAction says what Repair does to run r, left running.
func (k *Kernel) endRunAction(ctx context.Context, r session.Run) (RepairAction, error) {
	evs, err := k.runEvents(ctx, r)
	if err != nil {
		return RepairAction{}, err
	}
	rp := replayRun(evs)
	if rp.terminal != nil {
		return RepairAction{Kind: RepairRecordEnd, RunID: r.ID,
			Detail: fmt.Sprintf("run %s ended in the log at seq %d: its record says so too", r.ID, rp.terminal.Seq)}, nil
	}
	closing, results := rp.closers()
	return RepairAction{Kind: RepairEndRun, RunID: r.ID, Detail: fmt.Sprintf(
		"run %s ends interrupted: %d events close what it opened, %d tool calls get an error result, then RUN_ERROR",
		r.ID, len(closing)-len(results), len(results))}, nil
}

// hasRunning reports whether runs holds a running run, which recovery
// ends, freeing its session.
func hasRunning(runs []session.Run) bool {
	for _, r := range runs {
		if r.State == session.RunRunning {
			return true
		}
	}
	return false
}
