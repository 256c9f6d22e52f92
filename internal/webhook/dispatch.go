package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the zero DispatcherOptions fields.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultRetryFor   = 24 * time.Hour
	DefaultMinBackoff = 5 * time.Second
	DefaultMaxBackoff = time.Hour
	DefaultPollEvery  = time.Second
	DefaultWorkers    = 4
	DefaultKeepFor    = 7 * 24 * time.Hour
)

// claimMargin is how much longer than an attempt may take a claim lasts:
// a replica that dies mid-attempt holds its deliveries that much longer.
const claimMargin = 30 * time.Second

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	Outbox  Outbox
	Keys    Keyring
	Policy  Policy
	Replica string // names this replica's claims, for the operator reading them
	// Timeout bounds one attempt, connecting included.
	Timeout time.Duration
	// RetryFor is how long a delivery is retried, from when it was
	// scheduled, before it is failed.
	RetryFor               time.Duration
	MinBackoff, MaxBackoff time.Duration // between attempts: doubling from min, capped at max
	PollEvery              time.Duration // how often the outbox is read when nothing wakes the dispatcher
	Workers                int           // attempts in flight at once
	KeepFor                time.Duration // delivered and failed deliveries are deleted after this
	UserAgent              string
	Logger                 *slog.Logger
	Now                    func() time.Time
}

// Dispatcher delivers the outbox: it claims due deliveries, posts them,
// and records each outcome. Every replica runs one; claims keep them from
// sending a delivery twice at once.
type Dispatcher struct {
	opts   DispatcherOptions
	client *http.Client
	ctx    context.Context // cancelled by Close; attempts run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop and every attempt
	wake   chan struct{}  // Notify: something is due now
	freed  chan struct{}  // an attempt ended: a worker is free
	stats  Stats
}

// Stats count outcomes since start, for metrics.
type Stats struct {
	Delivered, Retried, Failed atomic.Int64
}

// NewDispatcher returns a dispatcher; Start starts it.
func NewDispatcher(opts DispatcherOptions) *Dispatcher {
	setDefaults(&opts)
	ctx, cancel := context.WithCancel(context.Background())
	return &Dispatcher{opts: opts, client: opts.Policy.Client(opts.Timeout), ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1)}
}

func setDefaults(o *DispatcherOptions) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, DefaultTimeout)
	def(&o.RetryFor, DefaultRetryFor)
	def(&o.MinBackoff, DefaultMinBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.PollEvery, DefaultPollEvery)
	def(&o.KeepFor, DefaultKeepFor)
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.UserAgent == "" {
		o.UserAgent = "kerneld"
	}
}

// Start starts delivering.
func (d *Dispatcher) Start() { d.wg.Go(d.loop) }

// Notify tells the dispatcher that deliveries were added: it reads the
// outbox now instead of at its next poll.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Close stops claiming, cancels the attempts in flight (their deliveries
// are due again at once, for whoever reads the outbox next) and waits for
// them, or for ctx to end.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.cancel()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop webhook deliveries: %w", ctx.Err())
	}
}

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() *Stats { return &d.stats }

// Enqueue adds deliveries to the outbox and wakes the dispatcher. Writes
// that can put deliveries in the same store write as what they announce
// do that instead, then call Notify.
func (d *Dispatcher) Enqueue(ctx context.Context, ds ...Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	if err := d.opts.Outbox.AddDeliveries(ctx, ds...); err != nil {
		return err
	}
	d.Notify()
	return nil
}

// loop claims what is due whenever a worker is free, until Close.
func (d *Dispatcher) loop() {
	poll := time.NewTicker(d.opts.PollEvery)
	defer poll.Stop()
	sem := make(chan struct{}, d.opts.Workers)
	nextPrune := d.opts.Now()
	for {
		if now := d.opts.Now(); !now.Before(nextPrune) {
			d.prune(now)
			nextPrune = now.Add(time.Hour)
		}
		free := cap(sem) - len(sem)
		if free > 0 && d.claim(sem, free) == free {
			continue // maybe more is due
		}
		select {
		case <-d.ctx.Done():
			return
		case <-d.wake:
		case <-d.freed:
		case <-poll.C:
		}
	}
}

// claim claims up to n due deliveries and starts an attempt on each,
// returning how many it started.
func (d *Dispatcher) claim(sem chan struct{}, n int) int {
	token := d.opts.Replica + "/" + randomHex()
	ds, err := d.opts.Outbox.ClaimDeliveries(d.ctx, token, d.opts.Now(), d.opts.Timeout+claimMargin, n)
	if err != nil {
		if d.ctx.Err() == nil {
			d.opts.Logger.Warn("claim webhook deliveries", "err", err)
		}
		return 0
	}
	for _, del := range ds {
		sem <- struct{}{}
		d.wg.Go(func() {
			defer func() {
				<-sem
				select {
				case d.freed <- struct{}{}:
				default:
				}
			}()
			d.finish(d.attempt(del))
		})
	}
	return len(ds)
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// prune deletes finished deliveries older than KeepFor.
func (d *Dispatcher) prune(now time.Time) {
	n, err := d.opts.Outbox.PruneDeliveries(d.ctx, now.Add(-d.opts.KeepFor))
	switch {
	case err != nil && d.ctx.Err() == nil:
		d.opts.Logger.Warn("prune webhook deliveries", "err", err)
	case n > 0:
		d.opts.Logger.Info("webhook deliveries pruned", "deleted", n)
	}
}

// finish records an attempt's outcome. A lost claim means another replica
// took the delivery after this one's claim expired: its outcome stands.
func (d *Dispatcher) finish(del Delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	err := d.opts.Outbox.FinishAttempt(ctx, del)
	switch {
	case errors.Is(err, ErrClaimLost):
		d.opts.Logger.Warn("webhook delivery claim lost", "delivery", del.ID, "url", del.URL)
	case err != nil:
		// The claim expires and the delivery is attempted again.
		d.opts.Logger.Error("record webhook delivery", "delivery", del.ID, "err", err)
	}
}

// attempt posts del once and returns it with the outcome recorded.
func (d *Dispatcher) attempt(del Delivery) Delivery {
	key, ok := d.opts.Keys[del.KeyID]
	if !ok {
		del.State, del.LastError = StateFailed, "its signing secret is no longer configured"
		del.Attempts++
		del.LastAttemptAt = d.opts.Now()
		d.stats.Failed.Add(1)
		d.opts.Logger.Warn("webhook delivery failed", "delivery", del.ID, "url", del.URL, "err", del.LastError)
		return del
	}
	now := d.opts.Now()
	status, err := d.post(del, key, now)
	if d.ctx.Err() != nil {
		del.NextAt = now // cut by Close: not an attempt; due again at once
		return del
	}
	del.Attempts++
	del.LastAttemptAt, del.LastStatus = now, status
	if err == nil {
		del.State, del.LastError = StateDelivered, ""
		d.stats.Delivered.Add(1)
		d.opts.Logger.Debug("webhook delivered", "delivery", del.ID, "url", del.URL, "attempts", del.Attempts)
		return del
	}
	del.LastError = err.Error()
	next := now.Add(d.backoff(del.Attempts))
	if next.After(del.ScheduledAt.Add(d.opts.RetryFor)) {
		del.State = StateFailed
		d.stats.Failed.Add(1)
		d.opts.Logger.Warn("webhook delivery failed", "delivery", del.ID, "url", del.URL, "attempts", del.Attempts, "err", err)
		return del
	}
	del.NextAt = next
	d.stats.Retried.Add(1)
	d.opts.Logger.Info("webhook delivery will be retried", "delivery", del.ID, "url", del.URL, "attempts", del.Attempts,
		"next_at", next, "err", err)
	return del
}

// maxResponseBytes is how much of a receiver's answer is read (so the
// connection can be reused) before it is dropped.
const maxResponseBytes = 64 << 10

// post sends del signed by key at now, and returns the receiver's status;
// the error says why it was not taken (no answer, or not 2xx).
func (d *Dispatcher) post(del Delivery, key Key, now time.Time) (int, error) {
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, del.URL, bytes.NewReader(del.Body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.opts.UserAgent)
	key.SetHeaders(req.Header, del.ID, now, del.Body)
	res, err := d.client.Do(req)
	if err != nil {
		return 0, describeSendError(err)
	}
	defer func() { _ = res.Body.Close() }()                                // the status is the outcome
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseBytes)) // only to reuse the connection
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, fmt.Errorf("the receiver answered %d %s", res.StatusCode, http.StatusText(res.StatusCode))
	}
	return res.StatusCode, nil
}

// describeSendError says why a request got no answer, without the URL
// that *url.Error repeats (the delivery names it).
func describeSendError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if ue.Timeout() {
			return errors.New("no answer within the timeout")
		}
		err = ue.Err
	}
	return fmt.Errorf("send: %w", err)
}

// backoff is the wait after the n-th failed attempt: MinBackoff doubled
// n-1 times, at most MaxBackoff, less up to a fifth at random so that
// deliveries failed together do not retry together.
func (d *Dispatcher) backoff(n int) time.Duration {
	wait := d.opts.MaxBackoff
	if n <= 30 && d.opts.MinBackoff<<(n-1) < wait {
		wait = d.opts.MinBackoff << (n - 1)
	}
	return wait - time.Duration(mrand.Int64N(int64(wait/5)+1)) //nolint:gosec // jitter, not a secret
}

// Redeliver makes a tenant's failed or delivered delivery due again now,
// with a fresh retry window and the same webhook-id, and wakes the
// dispatcher.
func (d *Dispatcher) Redeliver(ctx context.Context, tenant, id string) (Delivery, error) {
	del, err := d.opts.Outbox.RedeliverDelivery(ctx, tenant, id, d.opts.Now())
	if err == nil {
		d.Notify()
	}
	return del, err
}
