package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kerneld/kerneld/internal/session"
)

// Listener is what a replica sharing the database needs from the others,
// over one connection of its own that LISTENs on two channels of the
// store's schema: the signals of the replicas (cancel, steer, approval
// decisions, close, delete; DESIGN.md §8), and the appends of every
// replica, which it follows for the sessions this replica's streams watch
// (Follow) and hands to deliver. So a replica holds the pool plus one
// connection, however many sessions its clients watch.
//
// A notification carries no events, only "<last seq> <session id>": the
// listener reads the events after its cursor from the store, so a burst
// of appends costs one read, and a notification it missed (Postgres
// keeps none for a connection that was down) costs nothing once the next
// one comes. Every CheckInterval it also compares the followed sessions'
// last seqs with its cursors, and it does so at once after (re)connecting,
// so a lost notification delays events by a second at most; signals the
// kernel catches with its own periodic re-read of the stored state.
//
// Publish and Follow may be called at any time; Run, called once by the
// listener's owner, listens until ctx ends or Close is called.
type Listener struct {
	st       *Store
	signals  string // the channels' names
	events   string
	handle   func(session.Signal)
	deliver  func([]session.Event)
	interval time.Duration

	mu      sync.Mutex
	follows map[string]*tail   // by session id
	due     bool               // a follow began since the last check
	wake    context.CancelFunc // ends the wait for a notification under way
	stop    context.CancelFunc // ends Run
	closed  bool
	running sync.WaitGroup
}

// tail is one followed session.
type tail struct {
	refs  int
	after int64 // the seq of the last event delivered, or where the tail began
}

// DefaultCheckInterval is how often a Listener compares the followed
// sessions' last seqs with what it delivered.
const DefaultCheckInterval = time.Second

// NewListener returns the store's listener: Run calls handle for each
// signal another replica (or this one) publishes, and deliver with the new
// events of each followed session, in seq order, from Run's goroutine.
// Neither may block.
func (s *Store) NewListener(handle func(session.Signal), deliver func([]session.Event)) *Listener {
	return &Listener{st: s, signals: s.channel(signalsChannel), events: s.channel(eventsChannel),
		handle: handle, deliver: deliver, interval: DefaultCheckInterval,
		follows: make(map[string]*tail)}
}

// wireSignal is a Signal as published: short names, since every replica
// decodes every signal.
type wireSignal struct {
	Kind      session.SignalKind `json:"k"`
	SessionID string             `json:"s,omitempty"`
	RunID     string             `json:"r,omitempty"`
	Seq       int64              `json:"q,omitempty"`
	From      string             `json:"f,omitempty"`
}

// Publish sends sig to every replica listening now, this one included.
func (l *Listener) Publish(ctx context.Context, sig session.Signal) error {
	payload, err := json.Marshal(wireSignal(sig))
	if err != nil {
		return fmt.Errorf("publish signal: %w", err)
	}
	if _, err := l.st.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, l.signals, string(payload)); err != nil {
		return fmt.Errorf("publish signal %s: %w", sig.Kind, unavailable(ctx, err))
	}
	return nil
}

// Follow starts following session sessionID after seq afterSeq, or adds
// a subscriber to the tail already following it.
func (l *Listener) Follow(sessionID string, afterSeq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.follows[sessionID]; t != nil {
		t.refs++
		return
	}
	l.follows[sessionID] = &tail{refs: 1, after: max(afterSeq, 0)}
	l.due = true
	if l.wake != nil {
		l.wake() // check the new tail now rather than at the next interval
	}
}

// Unfollow removes a subscriber of session sessionID; the last one stops
// the tail.
func (l *Listener) Unfollow(sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.follows[sessionID]; t != nil {
		if t.refs--; t.refs == 0 {
			delete(l.follows, sessionID)
		}
	}
}

// Run listens until ctx ends or Close is called, then returns nil. A lost
// connection is logged and made again, after a pause that grows while
// Postgres stays away. It may be called once.
func (l *Listener) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.stop = cancel
	l.running.Add(1)
	l.mu.Unlock()
	defer l.running.Done()
	pause := backoffMin
	for {
		err := l.listen(ctx, &pause)
		if ctx.Err() != nil {
			return nil
		}
		l.st.log.Warn("postgres listener: connection lost; listening again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, backoffMax)
	}
}

// The pause between attempts to reach a Postgres that went away.
const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 5 * time.Second
)

// listen connects, LISTENs, catches up and then handles notifications
// until the connection is lost, which it returns the reason for, or ctx
// ends. Once listening it resets pause.
func (l *Listener) listen(ctx context.Context, pause *time.Duration) error {
	conn, err := pgx.ConnectConfig(ctx, l.st.config.Copy())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, c := range []string{l.signals, l.events} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c}.Sanitize()); err != nil {
			return err
		}
	}
	*pause = backoffMin
	l.catchUp(ctx, true) // what was appended while nobody listened
	next := time.Now().Add(l.interval)
	for {
		n, timedOut, err := l.wait(ctx, conn, time.Until(next))
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case n != nil:
			l.notified(ctx, n.Channel, n.Payload)
		case timedOut:
			// woken by Follow, or the interval is over
		case err != nil:
			return err
		}
		if time.Now().After(next) {
			l.catchUp(ctx, true)
			next = time.Now().Add(l.interval)
		} else {
			l.catchUp(ctx, false)
		}
	}
}

// wait waits up to d for a notification; Follow may end it sooner.
// timedOut reports that it ended so with the connection still good: the
// connection's deadline interrupts the read, which pgx survives.
func (l *Listener) wait(ctx context.Context, conn *pgx.Conn, d time.Duration) (n *pgconn.Notification, timedOut bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, max(d, time.Millisecond))
	defer cancel()
	l.mu.Lock()
	if l.due {
		l.mu.Unlock()
		return nil, true, nil // a follow is waiting for its first check
	}
	l.wake = cancel
	l.mu.Unlock()
	n, err = conn.WaitForNotification(wctx)
	l.mu.Lock()
	l.wake = nil
	l.mu.Unlock()
	return n, err != nil && wctx.Err() != nil && !conn.IsClosed(), err
}

// notified handles one notification.
func (l *Listener) notified(ctx context.Context, channel, payload string) {
	switch channel {
	case l.signals:
		var w wireSignal
		if err := json.Unmarshal([]byte(payload), &w); err != nil {
			l.st.log.Warn("postgres listener: dropped a malformed signal", "err", err)
			return
		}
		l.handle(session.Signal(w))
	case l.events:
		seqText, id, ok := strings.Cut(payload, " ")
		seq, err := strconv.ParseInt(seqText, 10, 64)
		if !ok || err != nil {
			return
		}
		if after, ok := l.cursor(id); ok && seq > after {
			l.fetch(ctx, id, after)
		}
	}
}

// cursor returns the seq the tail of session id delivered up to, if it
// is followed.
func (l *Listener) cursor(id string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.follows[id]
	if t == nil {
		return 0, false
	}
	return t.after, true
}

// catchUp reads the last seqs of the followed sessions (all of them when
// all is set, else those a Follow added since) and fetches what a tail
// has not delivered yet.
func (l *Listener) catchUp(ctx context.Context, all bool) {
	l.mu.Lock()
	if !all && !l.due {
		l.mu.Unlock()
		return
	}
	l.due = false
	ids := make([]string, 0, len(l.follows))
	for id := range l.follows {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	rows, err := l.st.pool.Query(ctx, `SELECT id, last_seq FROM sessions WHERE id = ANY($1)`, ids)
	if err != nil {
		l.st.log.Warn("postgres listener: check followed sessions", "err", err)
		return
	}
	last := make(map[string]int64, len(ids))
	var id string
	var seq int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error { last[id] = seq; return nil }); err != nil {
		l.st.log.Warn("postgres listener: check followed sessions", "err", err)
		return
	}
	for id, seq := range last {
		if after, ok := l.cursor(id); ok && seq > after {
			l.fetch(ctx, id, after)
		}
	}
}

// fetch reads session id's events after after and delivers them, moving
// the tail's cursor, unless the tail moved or stopped meanwhile.
func (l *Listener) fetch(ctx context.Context, id string, after int64) {
	evs, err := l.st.ReadEvents(ctx, id, after, tailCount)
	if err != nil || len(evs) == 0 {
		return // a deleted session has nothing more to deliver; a failure is retried at the next check
	}
	l.mu.Lock()
	t := l.follows[id]
	ok := t != nil && t.after == after
	if ok {
		t.after = evs[len(evs)-1].Seq
		if len(evs) == tailCount {
			l.due = true // more to read: the next round fetches it
		}
	}
	l.mu.Unlock()
	if ok {
		l.deliver(evs)
	}
}

// tailCount bounds the events one fetch reads.
const tailCount = 512

// Close stops Run and waits for it to return.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	if l.stop != nil {
		l.stop()
	}
	l.mu.Unlock()
	l.running.Wait()
	return nil
}
