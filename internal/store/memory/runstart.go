package memory

import (
	"context"
	"maps"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// StartRun writes st, which starts a run, under the session's lock: the
// checks all come first, so a failure changes nothing; see
// kernel.RunStore.
func (s *Store) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if err := session.CheckRunStart(st); err != nil {
		return err
	}
	id := st.Session.ID
	return s.write(id, func(rec *record) error {
		if err := rec.fenced(token, s.now()); err != nil {
			return err
		}
		if !st.Session.CreatedAt.Equal(rec.key.CreatedAt) || !maps.Equal(st.Session.Metadata, rec.sess.Metadata) {
			return errdefs.New(errdefs.ErrInvalid, errdefs.CodeInvalidRequest, "a run's start may not move session %s in the listing", id)
		}
		if rec.sess.Version != st.Session.Version {
			return session.ErrStale
		}
		i, err := rec.checkStartRun(st)
		if err != nil {
			return err
		}
		r := cloneRun(st.Run)
		r.StartSeq = rec.sess.LastSeq + 1
		if st.Create {
			if rec.runAt == nil {
				rec.runAt = make(map[string]int)
			}
			rec.runAt[r.ID] = len(rec.runs)
			rec.runs = append(rec.runs, r)
		} else {
			r.Version++
			rec.runs[i] = r
		}
		_ = rec.update(st.Session) // its version was checked above
		for i := range st.Events {
			rec.sess.LastSeq++
			st.Events[i].Seq = rec.sess.LastSeq
			rec.push(st.Events[i])
		}
		for i := range st.Messages {
			st.Messages[i].Position = int64(len(rec.msgs)) + 1
			rec.msgs = append(rec.msgs, cloneMessage(st.Messages[i]))
		}
		return nil
	})
}

// checkStartRun checks st's run against the session's runs: a new one
// under its constraints, a started one under the version rule. It returns
// the index of the stored run st updates.
func (rec *record) checkStartRun(st *session.RunStart) (int, error) {
	i, ok := rec.findRun(st.Run.ID)
	switch {
	case st.Create && ok:
		return 0, session.RunExists(st.Run.ID)
	case st.Create:
		return 0, rec.check(st.Run, st.Constraints)
	case !ok:
		return 0, session.RunNotFound(st.Run.ID)
	case rec.runs[i].Version != st.Run.Version:
		return 0, session.ErrStale
	}
	return i, nil
}
