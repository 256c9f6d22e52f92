package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CloseSession closes a session: its run, if any, is cancelled and
// recorded, no new run is accepted, and its streams end after its final
// event. The history stays readable until the session is deleted.
func (k *Kernel) CloseSession(ctx context.Context, id string) (session.Session, error) {
	if _, err := k.GetSession(ctx, id); err != nil {
		return session.Session{}, err
	}
	s, err := k.closeSession(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	k.notifyEnded(s)
	return s, nil
}

// DeleteSession cancels the session's run and deletes the session with its
// history. A session with children is deleted only with cascade, and then
// its whole subtree goes first. The session is closed first, under its
// lock, so no child can be added while the subtree is being deleted.
func (k *Kernel) DeleteSession(ctx context.Context, id string, cascade bool) error {
	if _, err := k.GetSession(ctx, id); err != nil {
		return err
	}
	return k.deleteSession(ctx, id, cascade)
}

// deleteSession is DeleteSession without the tenant check, for the
// subtree of a checked session and for retention.
func (k *Kernel) deleteSession(ctx context.Context, id string, cascade bool) error {
	err := k.updateSession(ctx, id, func(s *session.Session) error {
		if !cascade {
			if err := k.refuseIfParent(ctx, id); err != nil {
				return err
			}
		}
		return closeState(s, k.now().UTC())
	})
	if err != nil {
		return err
	}
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: id})
	if err != nil {
		return fmt.Errorf("list children: %w", err)
	}
	for _, c := range children {
		if err := k.deleteSession(ctx, c.ID, true); err != nil {
			return err
		}
	}
	s, err := k.closeSession(ctx, id)
	if err != nil {
		return err
	}
	if err := k.store.DeleteSession(ctx, id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	k.notifyEnded(s)
	return nil
}

// refuseIfParent returns a conflict when session id has children.
func (k *Kernel) refuseIfParent(ctx context.Context, id string) error {
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: id})
	if err != nil {
		return fmt.Errorf("list children: %w", err)
	}
	if len(children) > 0 {
		return errdefs.New(errdefs.ErrConflict, "session_has_children",
			"session %s has %d child sessions; delete with cascade=true to delete them too", id, len(children)).
			With("children", len(children))
	}
	return nil
}

// closeState moves s to closed unless it already is.
func closeState(s *session.Session, now time.Time) error {
	if s.State == session.StateClosed {
		return nil
	}
	return s.Transition(session.StateClosed, now)
}

// closeSession moves session id to closed, then cancels its run and waits
// until the run has recorded its end. It returns the closed session.
func (k *Kernel) closeSession(ctx context.Context, id string) (session.Session, error) {
	err := k.updateSession(ctx, id, func(s *session.Session) error { return closeState(s, k.now().UTC()) })
	if err != nil {
		return session.Session{}, err
	}
	if err := k.stopRuns(ctx, id, errSessionClosed); err != nil {
		return session.Session{}, err
	}
	s, err := k.store.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

// stopRuns stops every run of session id, the active one and those queued
// behind it (a closed session starts none of them), and waits until each
// has been recorded or ctx ends.
func (k *Kernel) stopRuns(ctx context.Context, id string, cause error) error {
	for {
		k.mu.Lock()
		ar := k.active[id]
		k.mu.Unlock()
		if ar == nil {
			return nil
		}
		if err := k.stop(ctx, ar, cause); err != nil {
			return err
		}
	}
}

// stopActive stops run runID if it is session id's active run, and waits.
func (k *Kernel) stopActive(ctx context.Context, id, runID string, cause error) error {
	k.mu.Lock()
	ar := k.active[id]
	k.mu.Unlock()
	if ar == nil || ar.runID != runID {
		return nil
	}
	return k.stop(ctx, ar, cause)
}

// stop cancels ar with cause and waits until its end is recorded.
func (k *Kernel) stop(ctx context.Context, ar *activeRun, cause error) error {
	ar.cancel(cause)
	select {
	case <-ar.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for run %s to stop: %w", ar.runID, ctx.Err())
	}
}

// updateSession applies change to the stored session id under its lock.
func (k *Kernel) updateSession(ctx context.Context, id string, change func(*session.Session) error) error {
	unlock := k.lockSession(id)
	defer unlock()
	s, err := k.store.GetSession(ctx, id)
	if err != nil {
		return fmt.Errorf("get session: %w", err)
	}
	if err := change(&s); err != nil {
		return err
	}
	if err := k.store.UpdateSession(ctx, s); err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	return nil
}

// notifyEnded tells the observers that session s will log nothing more.
func (k *Kernel) notifyEnded(s session.Session) {
	for _, o := range k.observers {
		o.ObserveSessionEnded(s.ID, s.LastSeq)
	}
}
