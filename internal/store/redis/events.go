package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
)

// A session's log is one Redis Stream whose entry ids are "<seq>-0", the
// seq of the entry's last event (see entries.go), so that an SSE cursor,
// which is a seq, is a stream id as it stands: Redis completes an id given
// without its "-<n>" part with "-0", so XREAD after "41" and XRANGE from
// "42" mean exactly "after event 41". Ids "<seq>-1" would need the suffix
// everywhere, and a bare seq would replay the event it names. "-0" is
// possible because seqs start at 1 (XADD refuses 0-0).

// packBufs holds the buffers batches are packed into, so that a busy
// session's appends do not allocate one each.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledPack is the largest buffer put back in packBufs; a rare huge
// batch should not pin its buffer.
const maxPooledPack = 64 << 10

// AppendEvents appends evs, all of one session, numbering them from the
// session's LastSeq + 1 in the same script that adds them to the stream,
// and writes each seq into evs, while the session's lease is held with
// token: the script checks it atomically with the append, and otherwise
// appends nothing and the error wraps session.ErrFenced. Either the whole
// batch is appended or none of it: a batch that names more than one
// session is ErrInvalid, an unknown session ErrNotFound (whatever the
// token). It returns once Redis has acknowledged the batch; whether that
// survives a Redis restart depends on Redis' persistence (see
// PersistenceWarning).
func (s *Store) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if len(evs) == 0 {
		return nil
	}
	id, err := session.EventsOfOneSession(evs)
	if err != nil {
		return err
	}
	buf := packBufs.Get().(*[]byte)
	var args []any // the token, the batch id, then the entries
	*buf, args = packBatch((*buf)[:0], make([]any, 2, 4+2*len(evs)/entryEvents), evs)
	args[0] = token
	last, err := s.appendPacked(ctx, id, args)
	if cap(*buf) <= maxPooledPack {
		packBufs.Put(buf)
	}
	switch {
	case isReply(err, replyNoSession):
		return session.SessionNotFound(id)
	case isReply(err, replyFenced):
		return fmt.Errorf("append events to session %s: %w", id, session.ErrFenced)
	case err != nil:
		return fmt.Errorf("append events to session %s: %w", id, err)
	}
	first := last - int64(len(evs)) + 1
	for i := range evs {
		evs[i].Seq = first + int64(i)
	}
	return nil
}

// Sending a batch again after its reply was lost: at most appendTries
// times in all, waiting appendRetryWait, then twice as long, between.
const (
	appendTries     = 4
	appendRetryWait = 20 * time.Millisecond
)

// appendPacked runs the append script with args, a batch's token, a slot
// for its id and its packed entries, and returns the session's new last
// seq. A batch whose reply is lost to a dropped
// connection or a restarting server is sent again, under an id that lets
// the script recognise it if it was applied after all: a blip between
// kerneld and Redis does not end the run whose events these are.
func (s *Store) appendPacked(ctx context.Context, id string, args []any) (int64, error) {
	tag := s.prefix + "{" + id + "}:"
	keys := []string{tag + "s", tag + "ev", tag + "lease"}
	args[1] = s.batchTag + strconv.FormatUint(s.batches.Add(1), 36)
	wait := appendRetryWait
	for try := 1; ; try++ {
		last, err := scriptEventsAppend.Run(ctx, s.rdb, keys, args...).Int64()
		if err == nil || try == appendTries || !resendable(err) {
			return last, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// resendable reports whether err may have lost the reply of a write, or
// found the server not ready yet, rather than being the write's answer.
func resendable(err error) bool {
	if _, ok := replyText(err); ok {
		return isReply(err, "LOADING") || isReply(err, "TRYAGAIN")
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, goredis.ErrClosed)
}

// packString appends s to dst after its length in 4 bytes, big endian,
// as lib.lua's unpack_strings reads it.
func packString[S ~string | ~[]byte](dst []byte, s S) []byte {
	return append(binary.BigEndian.AppendUint32(dst, uint32(len(s))), s...)
}

// ReadEvents returns a session's events with seq > after in seq order, at
// most limit of them when limit > 0: one XRANGE from after+1 (of limit
// entries, which hold at least limit events), pipelined with the check
// that the session exists.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error) {
	after = max(after, 0)
	if after == math.MaxInt64 {
		return nil, s.requireSession(ctx, sessionID)
	}
	tag := s.prefix + "{" + sessionID + "}:"
	args := []any{"XRANGE", tag + "ev", strconv.FormatInt(after+1, 10), "+"}
	if limit > 0 {
		args = append(args, "COUNT", limit)
	}
	xrange := goredis.NewRawCmd(ctx, args...)
	pipe := s.rdb.Pipeline()
	_ = pipe.Process(ctx, xrange) // queued; Exec reports
	exists := pipe.Exists(ctx, tag+"s")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	evs, err := newEntryReader(xrange.Val()).entries(sessionID, after)
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	if limit > 0 && len(evs) > limit { // limit entries hold limit events or more
		evs = evs[:limit]
	}
	// Events and session go together, so either one shows it exists.
	if len(evs) == 0 && exists.Val() == 0 {
		return nil, session.SessionNotFound(sessionID)
	}
	return evs, nil
}

// requireSession returns nil if session id exists, an ErrNotFound if not.
func (s *Store) requireSession(ctx context.Context, id string) error {
	n, err := s.rdb.Exists(ctx, s.sessionKey(id)).Result()
	if err != nil {
		return fmt.Errorf("look up session %s: %w", id, err)
	}
	if n == 0 {
		return session.SessionNotFound(id)
	}
	return nil
}

// itoa formats n in decimal.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
