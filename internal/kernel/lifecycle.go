package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CloseSession closes a session and its child sessions: their runs, if
// any, are cancelled and recorded, no new run is accepted, and their
// streams end after their final events. The history stays readable until
// the session is deleted.
func (k *Kernel) CloseSession(ctx context.Context, id string) (session.Session, error) {
	return k.CloseSessionWithReason(ctx, id, "")
}

// MaxClosedReasonLen bounds the reason a client gives for closing a
// session, in bytes.
const MaxClosedReasonLen = 1024

// CloseSessionWithReason is CloseSession recording why the session was
// closed, when reason is set, as its ClosedReason; its children record
// that their parent was closed. Closing a closed session changes nothing.
func (k *Kernel) CloseSessionWithReason(ctx context.Context, id, reason string) (session.Session, error) {
	if len(reason) > MaxClosedReasonLen {
		return session.Session{}, errdefs.Invalid("reason", fmt.Sprintf("longer than %d bytes", MaxClosedReasonLen))
	}
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	return k.closeSession(ctx, s.ID, reason)
}

// DeleteSession cancels the session's run and deletes the session with its
// history. A session with children is deleted only with cascade, and then
// its whole subtree goes first. The session is closed first, under its
// lock, so no child can be added while the subtree is being deleted, and
// its run is stopped before its children go: a run waiting on a child it
// spawned must end cancelled with it, not find the child gone and carry on.
func (k *Kernel) DeleteSession(ctx context.Context, id string, cascade bool) error {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return err
	}
	id = s.ID // the key it is stored under
	return k.deleteSession(ctx, id, cascade)
}

// deleteSession is DeleteSession without the tenant check, for the
// subtree of a checked session and for retention.
func (k *Kernel) deleteSession(ctx context.Context, id string, cascade bool) error {
	// Under the session's stripe lock, which placing a child takes on its
	// parent: no child can join between the check and the close.
	unlock := k.lockSession(id)
	err := k.refuseChildren(ctx, id, cascade)
	if err == nil {
		err = k.updateSession(ctx, id, func(s *session.Session) error {
			return closeState(s, k.now().UTC())
		})
	}
	unlock()
	if err != nil {
		return err
	}
	if err := k.stopRuns(ctx, id); err != nil {
		return err
	}
	// Once its runs are over: a webhook receiver hears of each run's end,
	// queued ones too, before the session's.
	k.announceClosed(ctx, id, "deleted")
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: id})
	if err != nil {
		return fmt.Errorf("list children: %w", err)
	}
	for _, c := range children {
		if err := k.deleteSession(ctx, c.ID, true); err != nil {
			return err
		}
	}
	s, err := k.closeSession(ctx, id, "")
	if err != nil {
		return err
	}
	if err := k.store.DeleteSession(ctx, id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	k.notifyEnded(s)
	if k.feed != nil {
		k.feed.SessionChanged(s.Tenant, id, FeedSessionDeleted, &s)
	}
	return nil
}

// refuseChildren returns a conflict when session id has children, unless
// they are to be deleted too.
func (k *Kernel) refuseChildren(ctx context.Context, id string, cascade bool) error {
	if cascade {
		return nil
	}
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: id})
	if err != nil {
		return fmt.Errorf("list children: %w", err)
	}
	if len(children) > 0 {
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionHasChildren,
			"session %s has %d child sessions; delete with cascade=true to delete them too", id, len(children)).
			With("children", len(children))
	}
	return nil
}

// closeState moves s to closed unless it already is. A closed session
// no longer expires: retention deletes it DeleteAfter after it closed.
func closeState(s *session.Session, now time.Time) error {
	if s.State == session.StateClosed {
		return nil
	}
	s.ExpiresAt = time.Time{}
	return s.Transition(session.StateClosed, now)
}

// closeSession closes session id and its subtree. Each session is moved to
// closed, its runs are stopped and recorded, and, if it was open, every
// replica's observers are told it ended. A parent's runs are stopped
// before its children close, so a run waiting on a child it spawned ends
// cancelled rather than seeing the child end under it. reason, when set,
// is recorded as the session's ClosedReason. It returns the closed
// session.
func (k *Kernel) closeSession(ctx context.Context, id, reason string) (session.Session, error) {
	wasOpen := false
	err := k.updateSession(ctx, id, func(s *session.Session) error {
		if s.State == session.StateClosed {
			return errUnchanged
		}
		wasOpen = true
		if reason != "" {
			s.ClosedReason = reason
		}
		return closeState(s, k.now().UTC())
	})
	if err != nil {
		return session.Session{}, err
	}
	if err := k.stopRuns(ctx, id); err != nil {
		return session.Session{}, err
	}
	if wasOpen {
		k.announceClosed(ctx, id, reason) // after its runs' ends, as DeleteSession does
	}
	k.stopSessionMCP(id) // or, if a run still ends, the sweeper once it has
	if err := k.closeChildren(ctx, id); err != nil {
		return session.Session{}, err
	}
	s, err := k.store.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, fmt.Errorf("get session: %w", err)
	}
	if wasOpen {
		k.notifyEnded(s)
		k.feedChanged(s.Tenant, s.ID, FeedSessionClosed)
	}
	return s, nil
}

// closeChildren closes the child sessions of session id, with theirs: a
// child works for its parent and has nobody to answer once it is closed.
// A child already closed is skipped: whoever closed it closed its subtree,
// and a parent that spawned many children keeps them all, closed.
func (k *Kernel) closeChildren(ctx context.Context, id string) error {
	children, err := k.store.ListSessions(ctx, SessionQuery{ParentID: id})
	if err != nil {
		return fmt.Errorf("list children: %w", err)
	}
	for _, c := range children {
		if c.State == session.StateClosed {
			continue
		}
		reason := "parent session " + id + " was closed"
		if _, err := k.closeSession(ctx, c.ID, reason); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	return nil
}

// stopRuns stops every run of session id, which is closed, and waits until
// each has been recorded and the session is idle, or ctx ends. The
// session's owner, here or on another replica, stops them when it sees the
// session closed; a session nobody owns is taken here.
func (k *Kernel) stopRuns(ctx context.Context, id string) error {
	for {
		change := k.changes.next(id)
		idle, err := k.idle(ctx, id)
		if err != nil || idle {
			return err
		}
		if err := k.ensure(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		if err := k.awaitChange(ctx, change); err != nil {
			return fmt.Errorf("wait for the runs of session %s to stop: %w", id, err)
		}
	}
}

// idle reports whether session id has no unfinished run and its record
// names no active run: its owner has recorded the end of its last one.
func (k *Kernel) idle(ctx context.Context, id string) (bool, error) {
	work, err := k.hasWork(ctx, id)
	if err != nil || work {
		return false, err
	}
	s, err := k.store.GetSession(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return true, nil
	}
	return err == nil && s.ActiveRunID == "", err
}

// notifyEnded tells every replica's observers that session s will log
// nothing more.
func (k *Kernel) notifyEnded(s session.Session) {
	k.signal(Signal{Kind: SignalEnded, SessionID: s.ID, Seq: s.LastSeq})
}

// sessionClosed is the error of a change a closed session refuses.
func sessionClosed(id string) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionClosed, "session %s is closed", session.PublicID(id))
}
