package kernel

import (
	"context"
	"errors"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// MarkRead records that reader has read the caller's session id up to
// seq, and returns the session as it is then. The cursor only moves
// forward, and never past the session's last seq (see
// session.Session.MarkRead); a closed session is read like any other. A
// moved cursor is reported to the feed, whose streams show each reader
// its own unread count.
func (k *Kernel) MarkRead(ctx context.Context, id, reader string, seq int64) (session.Session, error) {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	if seq < 0 {
		return session.Session{}, errdefs.Invalid("seq", "must be 0 or more")
	}
	moved := false
	out := s
	err = k.updateSession(ctx, s.ID, func(cur *session.Session) error {
		out = *cur
		if moved = cur.MarkRead(reader, seq); !moved {
			return errUnchanged
		}
		out = *cur
		out.Version++
		return nil
	})
	if err != nil {
		return session.Session{}, err
	}
	if moved {
		k.feedChanged(out.Tenant, out.ID, FeedSessionRead)
	}
	return out, nil
}

// noteReply records on the session that the run's assistant message
// ending at seq was logged, so that readers count it unread. It is
// recorded before the run goes on, so the feed's entry for the run's end
// counts it; a failure to record only leaves the count short.
func (r *runner) noteReply(seq int64) {
	err := r.k.updateSession(r.storeCtx(), r.run.SessionID, func(s *session.Session) error {
		if !s.AddReply(seq) {
			return errUnchanged
		}
		return nil
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		r.log.Warn("record reply for unread counts", "err", err)
	}
}
