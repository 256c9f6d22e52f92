package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kerneld/kerneld/internal/session"
)

// StartRun writes st, which starts a run, in one transaction: the
// session's row and lease are locked first, as an append locks them; see
// kernel.RunStore.
func (s *Store) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if err := session.CheckRunStart(st); err != nil {
		return err
	}
	id, r := st.Session.ID, st.Run
	runExt, err := encodeExt(r.RunExt)
	if err != nil {
		return fmt.Errorf("start run %s: %w", r.ID, err)
	}
	meta, sessExt, err := sessionDocs(st.Session)
	if err != nil {
		return fmt.Errorf("start run %s: %w", r.ID, err)
	}
	docs, err := messageDocs(st.Messages)
	if err != nil {
		return err
	}
	var first, position int64
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		last, err := lockSeqs(ctx, tx, []string{id})
		if err != nil {
			return err
		}
		if _, ok := last[id]; !ok {
			return session.SessionNotFound(id)
		}
		if err := checkLease(ctx, tx, id, token); err != nil {
			return err
		}
		first = last[id] + 1
		r.StartSeq = first
		if err := startRunRecord(ctx, tx, st, r, runExt); err != nil {
			return err
		}
		if err := startSession(ctx, tx, st.Session, meta, sessExt); err != nil {
			return err
		}
		if position, err = insertMessages(ctx, tx, st.Messages, docs); err != nil {
			return err
		}
		var rows eventRows
		rows.add(st.Events, first)
		return rows.write(ctx, tx, map[string]int64{id: first + int64(len(st.Events)) - 1}, s.channel(eventsChannel))
	})
	if err != nil {
		return wrapUnlessKnown(err, "start run %s", r.ID)
	}
	for i := range st.Events {
		st.Events[i].Seq = first + int64(i)
	}
	for i := range st.Messages {
		st.Messages[i].Position = position + int64(i) + 1
	}
	return nil
}

// startRunRecord creates r, or moves the stored run to r under the
// version rule, as st says.
func startRunRecord(ctx context.Context, tx pgx.Tx, st *session.RunStart, r session.Run, ext *string) error {
	code, msg := runErrorArgs(r.Error)
	if st.Create {
		if err := runExists(ctx, tx, r.SessionID, r.ID); err == nil {
			return session.RunExists(r.ID)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := checkRun(ctx, tx, r, st.Constraints); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, createRunSQL, r.SessionID, r.ID, string(r.State), r.Input,
			r.IdempotencyKey, micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.EndedAt),
			code, msg, r.Usage.InputTokens, r.Usage.OutputTokens, r.StartSeq, r.EndSeq, r.Version, ext)
		return err
	}
	tag, err := tx.Exec(ctx, updateRunSQL, string(r.State), r.Input, r.IdempotencyKey,
		micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.EndedAt), code, msg,
		r.Usage.InputTokens, r.Usage.OutputTokens, r.StartSeq, r.EndSeq, ext, r.SessionID, r.ID, r.Version)
	switch {
	case err != nil:
		return err
	case tag.RowsAffected() > 0:
		return nil
	}
	if err := runExists(ctx, tx, r.SessionID, r.ID); errors.Is(err, pgx.ErrNoRows) {
		return session.RunNotFound(r.ID)
	} else if err != nil {
		return err
	}
	return session.ErrStale
}

// startSession replaces the stored session with sess under the version
// rule; its row is locked.
func startSession(ctx context.Context, tx pgx.Tx, sess session.Session, meta, ext *string) error {
	tag, err := tx.Exec(ctx, updateSessionSQL, sess.Tenant, sess.Agent, sess.Name, meta,
		string(sess.State), sess.ParentID, sess.RootID, sess.Depth, micros(sess.CreatedAt),
		micros(sess.UpdatedAt), int64(sess.TTL), nullMicros(sess.ExpiresAt), sess.ActiveRunID,
		sess.InheritMemory, sess.ForkedFrom, ext, sess.ID, sess.Version)
	switch {
	case err != nil:
		return err
	case tag.RowsAffected() == 0:
		return session.ErrStale
	}
	return indexMetadata(ctx, tx, sess, true)
}
