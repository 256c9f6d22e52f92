package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
)

// Signals is a small broadcast between the replicas sharing a Redis, over
// Pub/Sub on the channel <prefix>signals: cancel, steer, approval
// decisions, close and delete reach a session's owner this way (DESIGN.md
// §8). Pub/Sub keeps nothing: a replica that is not subscribed when a
// signal is published (restarting, reconnecting) never sees it, which is
// acceptable because the stored state is the truth and the kernel checks
// it again periodically.
//
// Publish may be called at any time. Run, called once by the signals'
// owner, delivers what arrives until Close.
type Signals struct {
	st      *Store
	channel string
	handle  func(session.Signal)
	loop    *loop
}

// signalsPing is how long a subscription may be quiet before Run pings
// the server, and again before it gives the connection up for dead: a
// connection whose peer vanished without closing it would otherwise wait
// for ever.
const signalsPing = 15 * time.Second

// NewSignals returns the store's signals; Run calls handle for each signal
// received, from Run's goroutine, one at a time. handle must not block.
func (s *Store) NewSignals(handle func(session.Signal)) *Signals {
	return &Signals{st: s, channel: s.prefix + "signals", handle: handle, loop: newLoop()}
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

// Publish sends sig to every replica subscribed now, this one included.
func (g *Signals) Publish(ctx context.Context, sig session.Signal) error {
	payload, err := json.Marshal(wireSignal(sig))
	if err != nil {
		return fmt.Errorf("publish signal: %w", err)
	}
	if err := g.st.rdb.Publish(ctx, g.channel, payload).Err(); err != nil {
		return fmt.Errorf("publish signal %s: %w", sig.Kind, err)
	}
	return nil
}

// Run subscribes and calls the handler for every signal received, until
// ctx ends or Close is called; then it returns nil. A lost subscription is
// logged and made again, after a pause that grows while the server stays
// away. It may be called once.
func (g *Signals) Run(ctx context.Context) error {
	ctx, end, err := g.loop.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	pause := newBackoff()
	for {
		err := g.listen(ctx, pause)
		if ctx.Err() != nil {
			return nil
		}
		g.st.log.Warn("redis signals: subscription lost; subscribing again", "err", err)
		if !pause.wait(ctx) {
			return nil
		}
	}
}

// listen subscribes and delivers signals until the subscription is lost,
// which it returns the reason for, or ctx ends. Once subscribed it resets
// pause.
func (g *Signals) listen(ctx context.Context, pause *backoff) error {
	ps := g.st.rdb.Subscribe(ctx, g.channel)
	defer func() { _ = ps.Close() }() // it may be closed already
	// Receiving blocks in a read that ctx cannot interrupt; closing the
	// subscription can.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, signalsPing)
		var netErr net.Error
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			pinged = false
			pause.reset()
			g.deliver(msg)
		case errors.As(err, &netErr) && netErr.Timeout() && !pinged:
			pinged = true // its answer is the next thing received
			if err := ps.Ping(ctx); err != nil {
				return err
			}
		case errors.As(err, &netErr) && netErr.Timeout():
			return errors.New("no answer to a ping")
		default:
			return err
		}
	}
}

// deliver hands a received message to the handler; subscription
// confirmations and pongs have nothing to deliver.
func (g *Signals) deliver(msg any) {
	m, ok := msg.(*goredis.Message)
	if !ok {
		return
	}
	var w wireSignal
	if err := json.Unmarshal([]byte(m.Payload), &w); err != nil {
		g.st.log.Warn("redis signals: dropped a malformed signal", "err", err)
		return
	}
	g.handle(session.Signal(w))
}

// Close stops Run and waits for it to return.
func (g *Signals) Close() error {
	g.loop.close()
	return nil
}

// backoff is the pause between attempts to reach a server that went away:
// from 50 ms, doubling up to 5 s, back to the start after a success.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: backoffMin} }

const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 5 * time.Second
)

func (b *backoff) reset() { b.next = backoffMin }

// wait pauses, and reports false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, backoffMax)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
