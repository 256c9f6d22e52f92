package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// CreateSession stores a new session; an existing id is ErrConflict. The
// new session's LastSeq is 0 whatever sess says: only AppendEvents moves
// it, and the log holds exactly LastSeq events.
func (s *Store) CreateSession(ctx context.Context, sess session.Session) error {
	rec, fields, err := s.sessionArgs(sess, sess.Version)
	if err != nil {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	args := append([]any{s.prefix, rec, sess.Version}, fields...)
	err = scriptSessionCreate.Run(ctx, s.rdb, []string{s.sessionKey(sess.ID)}, args...).Err()
	if isReply(err, replyExists) {
		return errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionExists, "session %s already exists", sess.ID)
	}
	if err != nil {
		return fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return nil
}

// UpdateSession replaces the stored session with sess, except LastSeq,
// which only AppendEvents moves, if the stored Version equals
// sess.Version; the stored Version becomes sess.Version+1. Otherwise it
// changes nothing and returns an error wrapping session.ErrStale.
func (s *Store) UpdateSession(ctx context.Context, sess session.Session) error {
	rec, fields, err := s.sessionArgs(sess, sess.Version+1)
	if err != nil {
		return fmt.Errorf("update session %s: %w", sess.ID, err)
	}
	args := append([]any{s.prefix, rec, sess.Version, sess.Version + 1}, fields...)
	err = scriptSessionUpdate.Run(ctx, s.rdb, []string{s.sessionKey(sess.ID)}, args...).Err()
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

// sessionArgs returns sess stored with version, and its indexed fields as
// the scripts take them (see session_fields in lib.lua).
func (s *Store) sessionArgs(sess session.Session, version int64) (rec []byte, fields []any, err error) {
	sess.Version, sess.LastSeq = version, 0 // the hash's last_seq is the truth
	if rec, err = json.Marshal(sess); err != nil {
		return nil, nil, fmt.Errorf("encode session: %w", err)
	}
	var md []byte
	for _, k := range slices.Sorted(maps.Keys(sess.Metadata)) {
		md = packString(md, metadataIndex(k, sess.Metadata[k]))
	}
	return rec, []any{sess.Tenant, sess.Agent, string(sess.State), sess.ParentID, sess.ForkedFrom,
		optMicros(sess.ExpiresAt), micros(sess.UpdatedAt), orderKey(sess.CreatedAt, sess.ID), md}, nil
}

// metadataIndex names, after the prefix, the index of the sessions whose
// metadata holds key = value. The key's length keeps apart the entries
// that one string of key and value would confuse ("a=b": "c", "a": "b=c").
func metadataIndex(key, value string) string {
	return "idx:meta:" + strconv.Itoa(len(key)) + ":" + key + value
}

// orderKey is a session's member in every index: its CreatedAt, in
// microseconds as 16 hex digits with the sign bit flipped (so that times
// before 1970 sort first too), then its id. Bytewise, order keys sort as
// listings go: by creation time, then by id.
func orderKey(created time.Time, id string) string {
	return timeKey(micros(created)) + id
}

// timeKey is the part of an order key that a time in microseconds gives.
func timeKey(us int64) string {
	return fmt.Sprintf("%016x", uint64(us)^(1<<63))
}

// idOf returns the session id of an order key.
func idOf(ok string) string { return ok[16:] }

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

// DeleteSession removes the session with everything it owns: its keys,
// its lease among them, and its entries in every index. Children are
// sessions of their own and stay.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := scriptSessionDelete.Run(ctx, s.rdb, s.keysOf(id).all(), s.prefix, id).Err()
	if isReply(err, replyNoSession) {
		return session.SessionNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// listChunk is how many sessions ListSessions loads at a time.
const listChunk = 256

// ListSessions returns the sessions matching q, newest first: by
// CreatedAt, then by id.
//
// Of the indexes that q's filters can use, it counts the candidates in
// each (one round trip) and reads from the smallest, a chunk at a time in
// listing order, checking every filter on the sessions it loads: so a
// tenant's listing reads that tenant's index, a user's listing the index
// of its metadata entry, and retention the few sessions due to expire or
// to be deleted.
func (s *Store) ListSessions(ctx context.Context, q session.Query) ([]session.Session, error) {
	r := rangeOf(q)
	if r.empty() {
		return nil, nil
	}
	src, err := s.pickSource(ctx, q, r)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if src.count == 0 {
		return nil, nil
	}
	var out []session.Session
	if src.byScore {
		out, err = s.listByScore(ctx, src, q, r)
	} else {
		out, err = s.listByKey(ctx, src.key, q, r)
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// keyRange is the range of order keys a listing may hold, as bounds of
// ZRANGEBYLEX: min "-" or "[<key>", max "+" or "(<key>". It comes from
// After, CreatedAfter and CreatedBefore; order keys keep microseconds, so
// a bound between two takes in the microsecond it falls in, and the
// sessions loaded are then checked against q itself.
type keyRange struct{ min, max string }

// rangeOf returns the range of order keys of q's listing.
func rangeOf(q session.Query) keyRange {
	r := keyRange{min: "-", max: "+"}
	below := func(key string) {
		if r.max == "+" || key < r.max[1:] {
			r.max = "(" + key
		}
	}
	if q.After != nil {
		below(orderKey(q.After.CreatedAt, q.After.ID))
	}
	if t := q.CreatedBefore; !t.IsZero() {
		below(timeKey(micros(t) + int64(min(t.Nanosecond()%1000, 1))))
	}
	if t := q.CreatedAfter; !t.IsZero() {
		r.min = "[" + timeKey(micros(t)+int64(1-min(t.Nanosecond()%1000, 1)))
	}
	return r
}

// empty reports whether no order key can be in r.
func (r keyRange) empty() bool {
	return r.min != "-" && r.max != "+" && r.min[1:] >= r.max[1:]
}

// holds reports whether order key ok is in r.
func (r keyRange) holds(ok string) bool {
	return (r.min == "-" || ok >= r.min[1:]) && (r.max == "+" || ok < r.max[1:])
}

// source is an index ListSessions can take candidates from.
type source struct {
	key     string
	byScore bool  // scored by a time; otherwise ordered by order key
	below   int64 // for byScore: only members scored below it
	count   int64
}

// pickSource returns the index serving q with the fewest candidates in r.
func (s *Store) pickSource(ctx context.Context, q session.Query, r keyRange) (source, error) {
	srcs := []source{{key: s.prefix + "idx:all"}}
	for _, f := range []struct{ name, value string }{
		{"tenant", q.Tenant}, {"agent", q.Agent}, {"state", string(q.State)}, {"parent", q.ParentID},
		{"fork", q.ForkedFrom},
	} {
		if f.value != "" {
			srcs = append(srcs, source{key: s.prefix + "idx:" + f.name + ":" + f.value})
		}
	}
	for k, v := range q.Metadata {
		srcs = append(srcs, source{key: s.prefix + metadataIndex(k, v)})
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
		n, err := s.rdb.ZLexCount(ctx, srcs[0].key, r.min, r.max).Result()
		srcs[0].count = n
		return srcs[0], err
	}
	pipe := s.rdb.Pipeline()
	counts := make([]*goredis.IntCmd, len(srcs))
	for i, src := range srcs {
		if src.byScore {
			counts[i] = pipe.ZCount(ctx, src.key, "-inf", "("+itoa(src.below))
		} else {
			counts[i] = pipe.ZLexCount(ctx, src.key, r.min, r.max)
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

// listByKey pages through the lexicographic index key from the top of r
// down, keeping the sessions that match q, until it has q.Limit of them.
func (s *Store) listByKey(ctx context.Context, key string, q session.Query, r keyRange) ([]session.Session, error) {
	chunk := listChunk
	if q.Limit > 0 && q.Limit < chunk {
		chunk = q.Limit
	}
	var out []session.Session
	for {
		oks, err := s.rdb.ZRevRangeByLex(ctx, key, &goredis.ZRangeBy{Max: r.max, Min: r.min, Count: int64(chunk)}).Result()
		if err != nil {
			return nil, err
		}
		if out, err = s.appendMatching(ctx, out, oks, q); err != nil || len(oks) < chunk || full(out, q) {
			return out, err
		}
		r.max = "(" + oks[len(oks)-1]
		chunk = listChunk // the first chunk's sessions did not all match
	}
}

// listByScore reads every candidate of the time-ordered index src, then
// loads those in r newest first, keeping the sessions that match q,
// until it has q.Limit of them.
func (s *Store) listByScore(ctx context.Context, src source, q session.Query, r keyRange) ([]session.Session, error) {
	oks, err := s.rdb.ZRangeByScore(ctx, src.key, &goredis.ZRangeBy{Min: "-inf", Max: "(" + itoa(src.below)}).Result()
	if err != nil {
		return nil, err
	}
	oks = slices.DeleteFunc(oks, func(ok string) bool { return !r.holds(ok) })
	slices.SortFunc(oks, func(a, b string) int { return strings.Compare(b, a) })
	var out []session.Session
	for len(oks) > 0 && !full(out, q) {
		n := min(len(oks), listChunk)
		if out, err = s.appendMatching(ctx, out, oks[:n], q); err != nil {
			return nil, err
		}
		oks = oks[n:]
	}
	return out, nil
}

// full reports whether out holds as many sessions as q asks for.
func full(out []session.Session, q session.Query) bool { return q.Limit > 0 && len(out) >= q.Limit }

// appendMatching loads the sessions of the order keys oks, in one round
// trip, and appends those matching q to out, up to q.Limit. Sessions
// deleted since their keys were read are skipped.
func (s *Store) appendMatching(ctx context.Context, out []session.Session, oks []string, q session.Query) ([]session.Session, error) {
	if len(oks) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(oks))
	for i, ok := range oks {
		cmds[i] = pipe.HMGet(ctx, s.sessionKey(idOf(ok)), "rec", "last_seq")
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

// CountSessions returns how many sessions tenant has stored: the size of
// its index.
func (s *Store) CountSessions(ctx context.Context, tenant string) (int, error) {
	n, err := s.rdb.ZCard(ctx, s.prefix+"idx:tenant:"+tenant).Result()
	if err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return int(n), nil
}
