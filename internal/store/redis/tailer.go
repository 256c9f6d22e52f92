package redis

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
)

// Tailer follows the logs of the sessions this replica's SSE clients
// watch, whichever replica appends to them (DESIGN.md §8, "streams
// anywhere"), and hands new events to deliver.
//
// The sessions are spread over Options.TailConns shards. Each shard owns
// one connection and keeps one blocking XREAD on it, naming the streams of
// all its sessions with each one's cursor, so a thousand watched sessions
// cost a handful of connections, never one per subscriber. A shard's XREAD
// also names a private wake-up stream: Follow and Unfollow add an entry to
// it, which ends the blocked read at once so the shard reads again with
// the new set of streams.
//
// Follows are counted: many subscribers of one session share one tail,
// which starts after the afterSeq of the Follow that began it; a later
// subscriber replays from the store what it needs before that.
type Tailer struct {
	st      *Store
	rdb     *goredis.Client // the shards' connections, for blocking reads only
	deliver func([]session.Event)
	shards  []*shard

	mu      sync.Mutex
	follows map[string]*follow // by session id

	loop      *loop
	closeOnce sync.Once // of the connections
}

// follow is one followed session.
type follow struct {
	sessionID string
	stream    string
	refs      int
	after     int64 // the seq of the last event delivered, or where the tail began
	shard     *shard
}

// shard is one connection's share of the followed sessions.
type shard struct {
	wake    string             // the wake-up stream's key
	follows map[string]*follow // by stream key; guarded by Tailer.mu
	dirty   bool               // the set changed and a wake-up is on its way; guarded by Tailer.mu
	wakeID  string             // the last wake-up read; owned by the shard's goroutine
}

// Tailing settings. A shard's read blocks for tailBlock at most, so a
// connection that died silently is noticed within tailBlock plus the read
// timeout's margin; a change of the followed set wakes it at once.
const (
	tailBlock    = 10 * time.Second
	tailTimeout  = tailBlock + 5*time.Second // the blocking connections' read timeout
	tailCount    = 64                        // entries read per stream and read: 64 to 2,048 events
	wakeLifetime = 24 * time.Hour            // a wake-up stream left by a crashed replica goes after this
)

// NewTailer returns a tailer of the store's logs that calls deliver with
// the new events of each followed session, in seq order per session, from
// the shards' goroutines: deliver must be safe for concurrent use (for
// different sessions) and must not block.
func (s *Store) NewTailer(deliver func([]session.Event)) (*Tailer, error) {
	opts, err := goredis.ParseURL(s.url)
	if err != nil {
		return nil, fmt.Errorf("redis tailer: %w", err)
	}
	opts.PoolSize, opts.MinIdleConns, opts.PipelinePoolSize = s.tails, 0, -1
	opts.ReadTimeout, opts.MaxRetries = tailTimeout, -1
	// CLIENT LIST shows the blocked reads as <prefix>tail.
	opts.ClientName = strings.Map(func(r rune) rune {
		if r <= ' ' {
			return '-'
		}
		return r
	}, s.prefix+"tail")
	t := &Tailer{st: s, rdb: goredis.NewClient(opts), deliver: deliver,
		follows: make(map[string]*follow), loop: newLoop()}
	id := uuid.NewString()
	for i := range s.tails {
		t.shards = append(t.shards, &shard{
			wake:    s.prefix + "tail:" + id + ":" + strconv.Itoa(i),
			follows: make(map[string]*follow),
			wakeID:  "0",
		})
	}
	return t, nil
}

// Follow starts following session sessionID after seq afterSeq, or adds a
// subscriber to the tail already following it.
func (t *Tailer) Follow(sessionID string, afterSeq int64) {
	t.mu.Lock()
	if f := t.follows[sessionID]; f != nil {
		f.refs++
		t.mu.Unlock()
		return
	}
	sh := t.shards[shardOf(sessionID, len(t.shards))]
	f := &follow{sessionID: sessionID, stream: t.st.keysOf(sessionID).ev, refs: 1, after: max(afterSeq, 0), shard: sh}
	t.follows[sessionID] = f
	sh.follows[f.stream] = f
	wake := t.markDirty(sh)
	t.mu.Unlock()
	if wake {
		t.wake(sh)
	}
}

// Unfollow removes a subscriber of session sessionID; the last one stops
// the tail, and deliver sees no events of the session after that.
func (t *Tailer) Unfollow(sessionID string) {
	t.mu.Lock()
	f := t.follows[sessionID]
	if f == nil {
		t.mu.Unlock()
		return
	}
	if f.refs--; f.refs > 0 {
		t.mu.Unlock()
		return
	}
	delete(t.follows, sessionID)
	delete(f.shard.follows, f.stream)
	wake := t.markDirty(f.shard)
	t.mu.Unlock()
	if wake {
		t.wake(f.shard)
	}
}

// markDirty records that sh's set changed and reports whether a wake-up
// must be sent: none is if one is already on its way. Called with t.mu.
func (t *Tailer) markDirty(sh *shard) bool {
	wake := !sh.dirty
	sh.dirty = true
	return wake
}

// wake ends sh's blocked read by adding to its wake-up stream. A failure
// is only logged: the shard's read fails too then, and it reads the new
// set when it tries again.
func (t *Tailer) wake(sh *shard) {
	ctx, cancel := context.WithTimeout(t.loop.stopped, time.Second)
	defer cancel()
	pipe := t.st.rdb.Pipeline()
	pipe.XAdd(ctx, &goredis.XAddArgs{Stream: sh.wake, MaxLen: 1, Values: []any{"w", "1"}})
	pipe.PExpire(ctx, sh.wake, wakeLifetime)
	if _, err := pipe.Exec(ctx); err != nil && t.loop.stopped.Err() == nil {
		t.st.log.Warn("redis tailer: wake a shard", "err", err)
	}
}

// shardOf spreads session ids over n shards.
func shardOf(sessionID string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID)) // never fails
	return int(h.Sum32() % uint32(n))
}

// Run tails the followed sessions until ctx ends or Close is called; then
// it returns nil. A shard whose connection fails logs it and reads again
// after a pause that grows while the server stays away. It may be called
// once.
func (t *Tailer) Run(ctx context.Context) error {
	ctx, end, err := t.loop.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var wg sync.WaitGroup
	for _, sh := range t.shards {
		wg.Go(func() { t.tail(ctx, sh) })
	}
	<-ctx.Done()
	t.closeConns() // ends the reads still blocked
	wg.Wait()
	return nil
}

// closeConns closes the shards' connections and deletes the wake-up
// streams.
func (t *Tailer) closeConns() {
	t.closeOnce.Do(func() {
		_ = t.rdb.Close() // reads in flight fail, as they should
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		wakes := make([]string, len(t.shards))
		for i, sh := range t.shards {
			wakes[i] = sh.wake
		}
		_ = t.st.rdb.Del(ctx, wakes...).Err() // else they expire
	})
}

// Close stops Run, waits for it to return, and closes the tailer's
// connections.
func (t *Tailer) Close() error {
	t.loop.close()
	t.closeConns()
	return nil
}

// tail keeps sh's blocking read going until ctx ends.
func (t *Tailer) tail(ctx context.Context, sh *shard) {
	pause := newBackoff()
	for ctx.Err() == nil {
		err := t.read(ctx, sh)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			t.st.log.Warn("redis tailer: read streams", "err", err)
			if !pause.wait(ctx) {
				return
			}
		default:
			pause.reset()
		}
	}
}

// read runs one XREAD of sh's streams and delivers what it returns.
func (t *Tailer) read(ctx context.Context, sh *shard) error {
	args, byStream := t.readArgs(sh)
	cmd := goredis.NewRawCmd(ctx, args...)
	if err := t.rdb.Process(ctx, cmd); err != nil {
		return err
	}
	return t.readReply(sh, byStream, newEntryReader(cmd.Val()))
}

// readArgs returns the XREAD of sh's wake-up stream and followed streams,
// each after its cursor, and the follows by stream key.
func (t *Tailer) readArgs(sh *shard) ([]any, map[string]*follow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sh.dirty = false
	fs := make([]*follow, 0, len(sh.follows))
	byStream := make(map[string]*follow, len(sh.follows))
	for key, f := range sh.follows {
		fs = append(fs, f)
		byStream[key] = f
	}
	args := make([]any, 0, 8+2*len(fs))
	args = append(args, "XREAD", "COUNT", tailCount, "BLOCK", tailBlock.Milliseconds(), "STREAMS", sh.wake)
	for _, f := range fs {
		args = append(args, f.stream)
	}
	args = append(args, sh.wakeID)
	for _, f := range fs {
		args = append(args, strconv.FormatInt(f.after, 10))
	}
	return args, byStream
}

// readReply parses an XREAD reply, RESP2 (an array of [key, entries]) or
// RESP3 (a map of key to entries), and delivers the events in it.
func (t *Tailer) readReply(sh *shard, byStream map[string]*follow, r *entryReader) error {
	kind, line, err := r.header()
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(line))
	switch {
	case kind == '_' || n < 0: // the read timed out
		return nil
	case kind != '*' && kind != '%':
		return fmt.Errorf("redis: XREAD answered type %q", kind)
	}
	for range n {
		if kind == '*' {
			if pair, err := r.count(); err != nil || pair != 2 {
				return cmpErr(err, errShortReply)
			}
		}
		key, err := r.str()
		if err != nil {
			return err
		}
		if string(key) == sh.wake {
			if err := t.readWake(sh, r); err != nil {
				return err
			}
			continue
		}
		f := byStream[string(key)]
		if f == nil {
			return fmt.Errorf("redis: XREAD answered for stream %s, not read", key)
		}
		evs, err := r.entries(f.sessionID, 0) // handOver drops what f has had
		if err != nil {
			return err
		}
		t.handOver(f, evs)
	}
	return nil
}

// readWake moves sh's cursor in its wake-up stream past the entries read.
func (t *Tailer) readWake(sh *shard, r *entryReader) error {
	n, err := r.count()
	if err != nil {
		return err
	}
	for range n {
		if pair, err := r.count(); err != nil || pair != 2 {
			return cmpErr(err, errShortReply)
		}
		id, err := r.str()
		if err != nil {
			return err
		}
		sh.wakeID = string(id)
		fields, err := r.count()
		if err != nil {
			return err
		}
		for range fields {
			if _, err := r.str(); err != nil {
				return err
			}
		}
	}
	return nil
}

// handOver delivers the events of evs, read for f, after f's cursor, if
// f is still followed, and moves the cursor past them. The first entry
// read may hold events up to the cursor too (see entries.go).
func (t *Tailer) handOver(f *follow, evs []session.Event) {
	t.mu.Lock()
	current := t.follows[f.sessionID] == f
	if current {
		for len(evs) > 0 && evs[0].Seq <= f.after {
			evs = evs[1:]
		}
		if len(evs) > 0 {
			f.after = evs[len(evs)-1].Seq
		}
	}
	t.mu.Unlock()
	if current && len(evs) > 0 {
		t.deliver(evs)
	}
}
