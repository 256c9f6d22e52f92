package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// StartRun writes st, which starts a run, as one call of the writer's
// next transaction, so a run's start costs a share of one group commit;
// see kernel.RunStore. Every check comes before the first statement that
// changes anything, so a call that fails its own checks changes nothing
// and the rest of the batch goes on.
func (s *Store) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if err := session.CheckRunStart(st); err != nil {
		return err
	}
	runExt, err := encodeExt(st.Run.RunExt)
	if err != nil {
		return fmt.Errorf("start run %s: %w", st.Run.ID, err)
	}
	meta, sessExt, err := sessionDocs(st.Session)
	if err != nil {
		return fmt.Errorf("start run %s: %w", st.Run.ID, err)
	}
	calls, err := encodeMessages(st.Messages)
	if err != nil {
		return err
	}
	positions := make([]int64, len(st.Messages))
	// st.Events are numbered as an append of their own in the op's
	// transaction; their seqs are written in once it has committed.
	evs := &writeReq{evs: st.Events, token: token}
	err = s.write(ctx, func(tx *batchTx) (own, err error) {
		if own, err := tx.checkStart(st, token); own != nil || err != nil {
			return own, err
		}
		last, _, err := tx.lastSeqOf(st.Session.ID)
		if err != nil {
			return nil, fmt.Errorf("start run %s: load last seq: %w", st.Run.ID, err)
		}
		r := st.Run
		r.StartSeq = last + 1
		if st.Create {
			own, err = tx.createRun(r, st.Constraints, runExt)
		} else {
			own, err = tx.updateRun(r, runExt)
		}
		if own != nil || err != nil {
			return own, err
		}
		if own, err := tx.updateSession(st.Session, meta, sessExt); own != nil || err != nil {
			return own, err // checked: a database failure only, which rolls back the batch
		}
		if len(st.Messages) > 0 {
			if own, err := tx.appendMessages(st.Messages, calls, positions, token); own != nil || err != nil {
				return own, err
			}
		}
		if err := tx.number(evs); err != nil || evs.err != nil {
			return evs.err, err
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	for i := range st.Events {
		st.Events[i].Seq = evs.first + int64(i)
	}
	for i := range st.Messages {
		st.Messages[i].Position = positions[i]
	}
	return nil
}

// checkStart makes the checks of StartRun that come before anything is
// written: the session exists at st.Session.Version, and its lease is
// held with token.
func (tx *batchTx) checkStart(st *session.RunStart, token int64) (own, err error) {
	id := st.Session.ID
	var version int64
	err = tx.queryRow(stmtSessionVersion, id).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return session.SessionNotFound(id), nil
	case err != nil:
		return nil, fmt.Errorf("start run %s: look up session: %w", st.Run.ID, err)
	case version != st.Session.Version:
		return session.ErrStale, nil
	}
	if err := tx.leases.fenced(id, token); err != nil {
		return err, nil
	}
	return nil, nil
}
