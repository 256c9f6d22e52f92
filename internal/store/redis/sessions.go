package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateSession stores a new session; an existing id is ErrConflict. The
// new session's LastSeq is 0 whatever sess says: only AppendEvents moves
// it, and the log holds exactly LastSeq events.
func (s *Store) CreateSession(ctx context.Context, sess session.Session) error {
	args, err := s.sessionArgs(sess, sess.Version)
	if err != nil {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	err = scriptSessionCreate.Run(ctx, s.rdb, []string{s.sessionKey(sess.ID)}, args...).Err()
	if isReply(err, replyExists) {
		return errdefs.New(errdefs.ErrConflict, "session_exists", "session %s already exists", sess.ID)
	}
	if err != nil {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return nil
}

// UpdateSession replaces the stored session with sess, keeping its
// LastSeq. It does not check versions: the stored Version becomes
// sess.Version, as in the other stores, until the kernel moves to
// UpdateSessionVersioned.
func (s *Store) UpdateSession(ctx context.Context, sess session.Session) error {
	return s.updateSession(ctx, sess, sess.Version, "")
}

// UpdateSessionVersioned replaces the stored session with sess, except
// LastSeq, which only AppendEvents moves, if the stored Version equals
// sess.Version; the stored Version becomes sess.Version+1. Otherwise it
// changes nothing and returns an error wrapping session.ErrStale.
func (s *Store) UpdateSessionVersioned(ctx context.Context, sess session.Session) error {
	return s.updateSession(ctx, sess, sess.Version+1, itoa(sess.Version))
}

// updateSession stores sess with version; expect, when not empty, is the
// Version the stored session must have.
func (s *Store) updateSession(ctx context.Context, sess session.Session, version int64, expect string) error {
	args, err := s.sessionArgs(sess, version)
	if err != nil {
		return fmt.Errorf("update session %s: %w", sess.ID, err)
	}
	err = scriptSessionUpdate.Run(ctx, s.rdb, []string{s.sessionKey(sess.ID)}, append(args, expect)...).Err()
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(sess.ID)
	case isReply(err, replyStale):
		return fmt.Errorf("update session %s: %w", sess.ID, session.ErrStale)
	case err != nil:
		return fmt.Errorf("update session %s: %w", sess.ID, err)
	}
	return nil
}

// sessionArgs returns the script arguments that store sess with version:
// the prefix, the id, the record, the version and the indexed fields (see
// session_fields in lib.lua).
func (s *Store) sessionArgs(sess session.Session, version int64) ([]any, error) {
	sess.Version, sess.LastSeq = version, 0 // the hash's last_seq is the truth
	rec, err := json.Marshal(sess)
	if err != nil {
		return nil, fmt.Errorf("encode session: %w", err)
	}
	return []any{s.prefix, sess.ID, rec, version,
		sess.Tenant, sess.Agent, string(sess.State), sess.ParentID,
		optMicros(sess.ExpiresAt), micros(sess.UpdatedAt)}, nil
}

// GetSession returns the session with id.
func (s *Store) GetSession(ctx context.Context, id string) (session.Session, error) {
	vals, err := s.rdb.HMGet(ctx, s.sessionKey(id), "rec", "last_seq").Result()
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	sess, ok, err := decodeSession(vals)
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	if !ok {
		return session.Session{}, session.SessionNotFound(id)
	}
	return sess, nil
}

// decodeSession decodes the reply of HMGET rec last_seq; ok is false when the
// session is missing.
func decodeSession(vals []any) (sess session.Session, ok bool, err error) {
	rec, _ := vals[0].(string)
	seq, _ := vals[1].(string)
	if rec == "" {
		return session.Session{}, false, nil
	}
	if err := json.Unmarshal([]byte(rec), &sess); err != nil {
		return session.Session{}, false, fmt.Errorf("decode session: %w", err)
	}
	if sess.LastSeq, err = strconv.ParseInt(seq, 10, 64); err != nil {
		return session.Session{}, false, fmt.Errorf("decode session: last seq: %w", err)
	}
	return sess, true, nil
}

// DeleteSession removes the session with everything it owns: its keys and
// its entries in every index. Children are sessions of their own and stay.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	k := s.keysOf(id)
	ks := []string{k.s, k.runm, k.ev, k.lease, k.runs, k.runi, k.runq, k.idem, k.msgs, k.mem}
	err := scriptSessionDelete.Run(ctx, s.rdb, ks, s.prefix, id).Err()
	if isReply(err, replyNoSession) {
		return session.SessionNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// listChunk is how many ids ListSessions reads from an index at a time.
const listChunk = 256

// ListSessions returns the sessions matching q, newest (largest id) first.
//
// Of the indexes that q's filters can use, it counts the candidates in each
// (one round trip) and reads from the smallest, checking every filter on
// the sessions it loads: so a tenant's listing reads that tenant's index,
// and retention reads the few sessions due to expire or to be deleted.
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	src, err := s.pickSource(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if src.count == 0 {
		return nil, nil
	}
	var out []session.Session
	if src.byScore {
		out, err = s.listByScore(ctx, src, q)
	} else {
		out, err = s.listByID(ctx, src.key, q)
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// source is an index ListSessions can take candidates from.
type source struct {
	key     string
	byScore bool  // scored by a time; otherwise ordered by id
	below   int64 // for byScore: only members scored below it
	count   int64
}

// pickSource returns the index serving q with the fewest candidates.
func (s *Store) pickSource(ctx context.Context, q session.Query) (source, error) {
	srcs := []source{{key: s.prefix + "idx:all"}}
	for _, f := range []struct{ name, value string }{
		{"tenant", q.Tenant}, {"agent", q.Agent}, {"state", string(q.State)}, {"parent", q.ParentID},
	} {
		if f.value != "" {
			srcs = append(srcs, source{key: s.prefix + "idx:" + f.name + ":" + f.value})
		}
	}
	// The bound is widened by a microsecond, since scores drop the
	// nanoseconds that the filters on the loaded sessions then compare.
	if !q.ExpiresBefore.IsZero() {
		srcs = append(srcs, source{key: s.prefix + "idx:expires", byScore: true, below: micros(q.ExpiresBefore) + 1})
	}
	if !q.UpdatedBefore.IsZero() {
		key := s.prefix + "idx:updated"
		if q.State == session.StateClosed {
			key = s.prefix + "idx:closed"
		}
		srcs = append(srcs, source{key: key, byScore: true, below: micros(q.UpdatedBefore) + 1})
	}
	if len(srcs) == 1 {
		n, err := s.rdb.ZLexCount(ctx, srcs[0].key, "-", lexBelow(q.Before)).Result()
		srcs[0].count = n
		return srcs[0], err
	}
	pipe := s.rdb.Pipeline()
	counts := make([]*goredis.IntCmd, len(srcs))
	for i, src := range srcs {
		if src.byScore {
			counts[i] = pipe.ZCount(ctx, src.key, "-inf", "("+itoa(src.below))
		} else {
			counts[i] = pipe.ZLexCount(ctx, src.key, "-", lexBelow(q.Before))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return source{}, err
	}
	best := 0
	for i := range srcs {
		srcs[i].count = counts[i].Val()
		if srcs[i].count < srcs[best].count {
			best = i
		}
	}
	return srcs[best], nil
}

// lexBelow is the upper bound of a lexicographic range of ids below
// before, or of all ids.
func lexBelow(before string) string {
	if before == "" {
		return "+"
	}
	return "(" + before
}

// listByID pages through the id-ordered index key from q.Before down,
// keeping the sessions that match q, until it has q.Limit of them.
func (s *Store) listByID(ctx context.Context, key string, q session.Query) ([]session.Session, error) {
	chunk := listChunk
	if q.Limit > 0 && q.Limit < chunk {
		chunk = q.Limit
	}
	var out []session.Session
	below := lexBelow(q.Before)
	for {
		ids, err := s.rdb.ZRevRangeByLex(ctx, key, &goredis.ZRangeBy{Max: below, Min: "-", Count: int64(chunk)}).Result()
		if err != nil {
			return nil, err
		}
		if out, err = s.appendMatching(ctx, out, ids, q); err != nil || len(ids) < chunk || full(out, q) {
			return out, err
		}
		below = "(" + ids[len(ids)-1]
	}
}

// listByScore reads every candidate of the time-ordered index src, then
// loads them newest first, keeping the sessions that match q, until it
// has q.Limit of them.
func (s *Store) listByScore(ctx context.Context, src source, q session.Query) ([]session.Session, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, src.key, &goredis.ZRangeBy{Min: "-inf", Max: "(" + itoa(src.below)}).Result()
	if err != nil {
		return nil, err
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return q.Before != "" && id >= q.Before })
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(b, a) })
	var out []session.Session
	for len(ids) > 0 && !full(out, q) {
		n := min(len(ids), listChunk)
		if out, err = s.appendMatching(ctx, out, ids[:n], q); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return out, nil
}

// full reports whether out holds as many sessions as q asks for.
func full(out []session.Session, q session.Query) bool { return q.Limit > 0 && len(out) >= q.Limit }

// appendMatching loads the sessions ids, in one round trip, and appends
// those matching q to out, up to q.Limit. Sessions deleted since their ids
// were read are skipped.
func (s *Store) appendMatching(ctx context.Context, out []session.Session, ids []string, q session.Query) ([]session.Session, error) {
	if len(ids) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.sessionKey(id), "rec", "last_seq")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	for _, cmd := range cmds {
		sess, ok, err := decodeSession(cmd.Val())
		if err != nil {
			return nil, err
		}
		if ok && q.Matches(&sess) && !full(out, q) {
			out = append(out, sess)
		}
	}
	return out, nil
}
