package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Taking the sessions another process left. A session with unfinished
// runs (running, waiting for a decision, queued) and no live lease was
// left by a process that stopped: this kernel takes its lease and hands
// it to a driver, which continues the run left running (runcontinue.go)
// and starts the queued ones. Three things find such sessions:
//
//   - Recover, once at startup: the process that ran them before crashed
//     or shut down (with one process, it was this kerneld's last run);
//   - the take-over scan, with replicas: a replica died, and its leases
//     expired;
//   - a released signal, with replicas: a replica shutting down let the
//     session go and asks the others to take it at once.

// The RUN_ERROR message of a run ended because its process stopped under
// it and it is not continued.
const interruptedMessage = "the run was interrupted: kerneld stopped while it was running"

// Recover takes every session that runs were left unfinished in and that
// no live replica holds, and drives it: a run left running or waiting for
// a decision is continued (see runcontinue.go) or, when it must not be,
// ended interrupted; queued runs start in order; a record left busy with
// nothing to run is freed. Call it once at startup, before serving. It
// returns how many sessions it took with a run to continue.
func (k *Kernel) Recover(ctx context.Context) (int, error) {
	runs, err := k.store.ListRunsByState(ctx, session.RunRunning)
	if err != nil {
		return 0, fmt.Errorf("list running runs: %w", err)
	}
	waiting, err := k.store.ListRunsByState(ctx, session.RunWaitingInput, session.RunQueued)
	if err != nil {
		return 0, fmt.Errorf("list waiting and queued runs: %w", err)
	}
	runs = append(runs, waiting...)
	n := 0
	for _, id := range sessionsOf(runs) {
		taken, err := k.takeOver(ctx, id, session.ResumeCrash)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return n, fmt.Errorf("recover session %s: %w", id, err)
		}
		if taken && slices.ContainsFunc(runs, func(r session.Run) bool { return r.SessionID == id && r.State != session.RunQueued }) {
			n++
		}
	}
	return n, k.freeSessions(ctx)
}

// sessionsOf returns the sessions of runs, each once, in order.
func sessionsOf(runs []session.Run) []string {
	var ids []string
	for _, r := range runs {
		if !slices.Contains(ids, r.SessionID) {
			ids = append(ids, r.SessionID)
		}
	}
	return ids
}

// takeOverEvery is how often, at most, a replica looks for sessions whose
// owner died: a dead replica's session is taken over at most this long
// after its lease expired. Each look reads the unfinished runs and tries
// the lease of each session held elsewhere (see README, "Lease TTL").
const takeOverEvery = 500 * time.Millisecond

// takeOverLoop takes over the sessions of replicas that died, looking
// every takeOverEvery (or half a lease TTL, if shorter), and those a
// replica released at shutdown, at once, until the kernel closes.
func (o *owner) takeOverLoop() {
	every := min(takeOverEvery, o.k.repl.LeaseTTL/2)
	t := time.NewTicker(every)
	defer t.Stop()
	lastStuck := time.Now()
	for {
		var err error
		select {
		case <-o.k.ctx.Done():
			return
		case <-t.C:
			err = o.k.takeOverAll(o.k.ctx)
			if err == nil && time.Since(lastStuck) >= stuckChildrenEvery {
				lastStuck = time.Now()
				err = o.k.takeOverStuckChildren(o.k.ctx)
			}
		case id := <-o.released:
			_, err = o.k.takeOver(o.k.ctx, id, session.ResumeShutdown)
		}
		if err != nil && o.k.ctx.Err() == nil && !errors.Is(err, errdefs.ErrNotFound) {
			o.k.log.Warn("take over sessions", "err", err)
		}
	}
}

// released hands takeOverLoop a session another replica let go; if the
// loop is busy the next scan finds it.
func (o *owner) releasedElsewhere(id string) {
	select {
	case o.released <- id:
	default:
	}
}

// takeOverAll takes the lease of every session with unfinished runs that
// no live replica holds, and drives it.
func (k *Kernel) takeOverAll(ctx context.Context) error {
	runs, err := k.store.ListRunsByState(ctx, session.RunRunning, session.RunWaitingInput, session.RunQueued)
	if err != nil {
		return err
	}
	for _, id := range sessionsOf(runs) {
		if k.owner.get(id) != nil {
			continue
		}
		if _, err := k.takeOver(ctx, id, session.ResumeTakeover); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	return nil
}

// stuckChildrenEvery is how often a replica looks for child sessions a
// dead replica left busy with nothing unfinished (takeOverStuckChildren):
// less often than for unfinished runs, since it lists busy sessions and
// what it finds is an answer late, not a run stopped.
const stuckChildrenEvery = 10 * time.Second

// takeOverStuckChildren takes the lease of every child session whose
// record says it is busy though no run of it is unfinished, and that no
// live replica holds: its replica died between its run's end and its
// settling, maybe before a background child's answer reached its parent.
// The driver frees it (freeSession), posting that answer.
func (k *Kernel) takeOverStuckChildren(ctx context.Context) error {
	for _, state := range []session.State{session.StateRunning, session.StateWaitingInput} {
		busy, err := k.store.ListSessions(ctx, SessionQuery{State: state})
		if err != nil {
			return fmt.Errorf("list %s sessions: %w", state, err)
		}
		for _, s := range busy {
			if s.ParentID == "" || k.owner.get(s.ID) != nil {
				continue
			}
			if work, err := k.hasWork(ctx, s.ID); err != nil || work {
				continue // unfinished runs are takeOverAll's
			}
			if _, err := k.takeOver(ctx, s.ID, session.ResumeTakeover); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// takeOver drives session id if nobody holds its lease, and reports
// whether it took it. leftBy says why its owner left a run unfinished,
// unless the run's record says.
func (k *Kernel) takeOver(ctx context.Context, id, leftBy string) (bool, error) {
	unlock := k.lockSession(id)
	h, fresh, err := k.owner.hold(ctx, id)
	unlock()
	if errors.Is(err, session.ErrLeaseHeld) || (err == nil && !fresh) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.leftBy = leftBy
	if leftBy != session.ResumeCrash {
		k.owner.takeovers.Add(1)
		k.log.Info("session taken over", "session", id, "left_by", leftBy)
	}
	k.owner.start(h)
	return true, nil
}

// freeSessions frees the sessions whose record says they are busy though
// no run of theirs is unfinished, and no replica holds them.
func (k *Kernel) freeSessions(ctx context.Context) error {
	for _, state := range []session.State{session.StateRunning, session.StateWaitingInput} {
		stuck, err := k.store.ListSessions(ctx, SessionQuery{State: state})
		if err != nil {
			return fmt.Errorf("list %s sessions: %w", state, err)
		}
		for _, s := range stuck {
			if k.owner.get(s.ID) != nil {
				continue
			}
			if err := k.freeSession(ctx, s.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// freeSession frees session id if its record says it is busy, or names an
// active run, but no run of it is unfinished: a crash between recording a
// run's end and its session's lets the session think it is busy forever.
func (k *Kernel) freeSession(ctx context.Context, id string) error {
	work, err := k.hasWork(ctx, id)
	if err != nil || work {
		return err
	}
	if s, err := k.store.GetSession(ctx, id); err == nil {
		k.deliverLeft(ctx, s)
	}
	return k.updateSession(ctx, id, func(s *session.Session) error {
		busy := s.State == session.StateRunning || s.State == session.StateWaitingInput
		if !busy && s.ActiveRunID == "" {
			return errUnchanged
		}
		if busy {
			s.State = session.StateCompleted
			if r, err := k.store.GetRun(ctx, s.ID, s.ActiveRunID); err == nil && r.Error != nil {
				s.State = session.StateError
			}
		}
		s.ActiveRunID, s.UpdatedAt = "", k.now().UTC()
		return nil
	})
}
