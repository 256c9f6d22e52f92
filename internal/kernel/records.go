package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// Records are read, changed and written back: updateSession and updateRun
// apply a change to the stored record and write it back under its version,
// again on a fresh read when another writer (possibly another replica) got
// there first; saveRun writes the run's owner's own copy.

// errUnchanged, returned by an update's change, leaves the record as it
// is stored.
var errUnchanged = errors.New("record unchanged")

// updateSession applies change to the stored session id and saves it,
// again on a fresh read whenever another writer, possibly on another
// replica, got there first (see session.ErrStale).
func (k *Kernel) updateSession(ctx context.Context, id string, change func(*session.Session) error) error {
	for {
		s, err := k.store.GetSession(ctx, id)
		if err != nil {
			return fmt.Errorf("get session: %w", err)
		}
		if err := change(&s); errors.Is(err, errUnchanged) {
			return nil
		} else if err != nil {
			return err
		}
		err = k.store.UpdateSession(ctx, s)
		if errors.Is(err, session.ErrStale) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update session: %w", err)
		}
		k.changes.notify(id)
		return nil
	}
}

// updateRun applies change to the stored run r and saves it, again on a
// fresh read if another writer got there first; r ends as stored. A change
// returning errUnchanged saves nothing.
func (k *Kernel) updateRun(ctx context.Context, r *session.Run, change func(*session.Run) error) error {
	for {
		cur, err := k.store.GetRun(ctx, r.SessionID, r.ID)
		if err != nil {
			return fmt.Errorf("get run: %w", err)
		}
		if err := change(&cur); errors.Is(err, errUnchanged) {
			*r = cur
			return nil
		} else if err != nil {
			return err
		}
		err = k.store.UpdateRun(ctx, cur)
		if errors.Is(err, session.ErrStale) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update run: %w", err)
		}
		cur.Version++
		*r = cur
		k.changes.notify(r.SessionID)
		return nil
	}
}

// saveRun stores r, the run's owner's copy: its state, times, usage and
// seqs. Requests from other replicas write only CancelRequested and
// Decisions, so when one got there first those are taken from the store
// and r is saved again. Only those fields and Version of r are written:
// the run's tool calls read the others meanwhile.
func (k *Kernel) saveRun(ctx context.Context, r *session.Run) error {
	for {
		err := k.store.UpdateRun(ctx, *r)
		if err == nil {
			r.Version++
			k.changes.notify(r.SessionID)
			return nil
		}
		if !errors.Is(err, session.ErrStale) {
			return fmt.Errorf("update run: %w", err)
		}
		cur, err := k.store.GetRun(ctx, r.SessionID, r.ID)
		if err != nil {
			return fmt.Errorf("get run: %w", err)
		}
		r.Version, r.Decisions = cur.Version, cur.Decisions
		r.CancelRequested = r.CancelRequested || cur.CancelRequested
	}
}
