package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/kerneld/kerneld/internal/session"
)

// StartRun writes st, which starts a run, in one script, one round trip:
// the run's record, the session's, the messages and the events that open
// the run, while the session's lease is held with token; see
// kernel.RunStore. The run's record is encoded here with its StartSeq,
// so the script also checks that the session's last seq is still the one
// st.Session was read with: if not, the start is session.ErrStale, as is
// a session or run at another version.
//
// Unlike an append it is not sent again when its reply is lost: a start
// that was applied after all fails its own checks the second time.
func (s *Store) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if err := session.CheckRunStart(st); err != nil {
		return err
	}
	args, err := s.startArgs(token, st)
	if err != nil {
		return fmt.Errorf("start run %s: %w", st.Run.ID, err)
	}
	k := s.keysOf(st.Session.ID)
	reply, err := scriptRunStart.Run(ctx, s.rdb, []string{k.s, k.runs, k.runm, k.runi, k.runst, k.idem, k.ev, k.lease, k.msgs},
		args...).Slice()
	if err := startError(err, st); err != nil {
		return err
	}
	if len(reply) == 2 && reply[0] == "DUP" {
		rec, _ := reply[1].(string)
		dup, err := decodeRun(rec)
		if err != nil {
			return fmt.Errorf("start run %s: %w", st.Run.ID, err)
		}
		return &session.DuplicateRunError{Run: dup}
	}
	first, ok1 := reply[1].(int64)
	last, ok2 := reply[2].(int64)
	if len(reply) != 3 || !ok1 || !ok2 {
		return fmt.Errorf("start run %s: unexpected reply %v", st.Run.ID, reply)
	}
	for i := range st.Messages {
		st.Messages[i].Position = first + int64(i)
	}
	firstSeq := last - int64(len(st.Events)) + 1
	for i := range st.Events {
		st.Events[i].Seq = firstSeq + int64(i)
	}
	return nil
}

// startError maps the script's error replies to the store's errors.
func startError(err error, st *session.RunStart) error {
	id, rid := st.Session.ID, st.Run.ID
	switch {
	case err == nil:
		return nil
	case isReply(err, replyNoSession):
		return session.SessionNotFound(id)
	case isReply(err, replyNoRun):
		return session.RunNotFound(rid)
	case isReply(err, replyExists):
		return session.RunExists(rid)
	case isReply(err, replyFenced):
		return fmt.Errorf("start run %s: %w", rid, session.ErrFenced)
	case isReply(err, replyStale):
		return fmt.Errorf("start run %s: %w", rid, session.ErrStale)
	}
	return fmt.Errorf("start run %s: %w", rid, err)
}

// startArgs returns run_start.lua's arguments for st.
func (s *Store) startArgs(token int64, st *session.RunStart) ([]any, error) {
	r, sess := st.Run, st.Session
	r.StartSeq = sess.LastSeq + 1
	version := r.Version + 1
	if st.Create {
		version = r.Version
	}
	runArgs, err := s.runArgs(r, version)
	if err != nil {
		return nil, err
	}
	rec, fields, err := s.sessionArgs(sess, sess.Version+1)
	if err != nil {
		return nil, err
	}
	since := ""
	if st.Create && !st.Constraints.IdempotentSince.IsZero() {
		since = itoa(micros(st.Constraints.IdempotentSince))
	}
	create := "0"
	if st.Create {
		create = "1"
	}
	args := make([]any, 0, 32+len(st.Messages)+2*len(st.Events))
	args = append(args, s.prefix, sess.ID, r.ID, token, sess.LastSeq, create)
	args = append(args, runArgs[3:]...) // record, version, state, created, key
	args = append(args, since, r.Version, rec, sess.Version, sess.Version+1)
	args = append(args, fields...)
	args = append(args, len(st.Messages))
	for _, m := range st.Messages {
		m.Position = 0 // a message's position is its place in the list
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
		}
		args = append(args, b)
	}
	args = append(args, s.batchTag+strconv.FormatUint(s.batches.Add(1), 36))
	_, args = packBatch(nil, args, st.Events)
	return args, nil
}
