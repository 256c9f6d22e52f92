package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// CallPolicy is how a network provider makes one model call: how long an
// attempt may take and how failed attempts are retried. The llm/openai and
// llm/anthropic adapters share it, so both behave the same way; agents set
// it with the model options timeout and max_retries (see DecodeOptions).
type CallPolicy struct {
	// Timeout bounds each attempt: the request and its whole stream.
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt may be retried.
	MaxRetries int
	// BaseDelay is the backoff before the first retry; it doubles for each
	// further one, up to MaxDelay, and is jittered.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxRetryAfter is the longest server-requested wait (Retry-After) that
	// is honoured; a server asking for more fails the call at once rather
	// than holding the run.
	MaxRetryAfter time.Duration
}

// DefaultCallPolicy returns the policy an agent gets when its model block
// sets no options.
func DefaultCallPolicy() CallPolicy {
	return CallPolicy{
		Timeout:       DefaultTimeout,
		MaxRetries:    DefaultMaxRetries,
		BaseDelay:     500 * time.Millisecond,
		MaxDelay:      8 * time.Second,
		MaxRetryAfter: time.Minute,
	}
}

// Do makes one model call: it runs attempt, which streams a response
// through the emit it is given, and retries it while the error is
// retryable (see Retryable) and MaxRetries allows, after a backoff or the
// server's Retry-After.
//
// It retries only before the first chunk has been emitted: once output has
// reached the client, a second attempt would repeat it, so a failure then
// fails the call. Each attempt runs under Timeout; an attempt that runs
// out of time fails with a retryable *ConnectionError. When ctx ends, Do
// returns ctx's error; when emit fails, Do returns emit's error unchanged.
func (p CallPolicy) Do(ctx context.Context, provider string, emit func(Chunk) error,
	attempt func(ctx context.Context, emit func(Chunk) error) error,
) error {
	c := &callState{emit: emit}
	for retry := 0; ; retry++ {
		err := p.try(ctx, provider, c, attempt)
		switch {
		case err == nil:
			return nil
		case c.emitErr != nil:
			return c.emitErr
		case ctx.Err() != nil:
			return ctx.Err()
		case c.started || retry >= p.MaxRetries:
			return err
		}
		delay, ok := p.delay(err, retry)
		if !ok {
			return err
		}
		if err := Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// callState tracks what one call has handed to the caller's emit.
type callState struct {
	emit    func(Chunk) error
	started bool  // a chunk was emitted: no more retries
	emitErr error // emit failed: the caller stopped the call
}

func (c *callState) send(ch Chunk) error {
	c.started = true
	if err := c.emit(ch); err != nil {
		c.emitErr = err
		return err
	}
	return nil
}

// try runs one attempt under the per-attempt timeout.
func (p CallPolicy) try(ctx context.Context, provider string, c *callState,
	attempt func(ctx context.Context, emit func(Chunk) error) error,
) error {
	actx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	err := attempt(actx, c.send)
	if err != nil && c.emitErr == nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return &ConnectionError{Provider: provider, Err: fmt.Errorf("no complete response within %s", p.Timeout)}
	}
	return err
}

// delay returns how long to wait before retry number retry+1, and false
// when err must not be retried.
func (p CallPolicy) delay(err error, retry int) (time.Duration, bool) {
	if !Retryable(err) {
		return 0, false
	}
	if ae, ok := errors.AsType[*APIError](err); ok && ae.RetryAfter > 0 {
		return ae.RetryAfter, ae.RetryAfter <= p.MaxRetryAfter
	}
	d := p.MaxDelay
	if retry < 30 && p.BaseDelay<<retry < p.MaxDelay {
		d = p.BaseDelay << retry
	}
	if d <= 0 {
		return 0, true
	}
	// Equal jitter: at least half the backoff, so retries stay spaced, and
	// a random rest, so clients that failed together do not retry together.
	return d/2 + rand.N(d/2+1), true
}
