package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Stopping a kernel takes two calls, so that a deploy interrupts nothing:
//
//  1. Drain stops taking new work and lets each run reach its next step
//     boundary, where it leaves to be continued by another process (a run
//     waiting only for a person's decision leaves at once). The caller
//     gives it a budget, its context's deadline.
//  2. Close cuts whatever is still running where it is: its cut step is
//     made again where it continues. Either way each session's lease is
//     released at once and the other replicas are signalled, so they
//     continue the runs within a moment, not after the lease TTL; with
//     one process, the next start continues them.
//
// A run whose agent says on_crash: interrupt ends interrupted instead, as
// it always has.

// Drain refuses new runs and sessions from now on, and asks every run to
// stop at its next step boundary and leave, to be continued by another
// process. It returns once every session this replica held was let go,
// or when ctx ends: then Close cuts the runs still running.
func (k *Kernel) Drain(ctx context.Context) error {
	k.closed.Store(true)
	hs := k.owner.closeLeases()
	for _, h := range hs {
		if ar := h.current(); ar != nil {
			ar.stopForShutdown()
		}
	}
	if drainAsked != nil {
		drainAsked()
	}
	if err := k.owner.awaitReleased(ctx, hs); err != nil {
		return fmt.Errorf("drain runs: %w", err)
	}
	return nil
}

// stopForShutdown asks ar to leave at its next step boundary, or, when its
// agent does not continue runs its process leaves, stops it to end
// interrupted.
func (ar *activeRun) stopForShutdown() {
	if ar.continues {
		ar.askToLeave()
		return
	}
	ar.cancel(errShutdown)
}

// Close cuts every run where it is, to be continued by another process
// (or ended interrupted, per its agent), releases every lease, stops the
// retention sweeper and the lease loops and waits for all of them, or for
// ctx to end. Then it stops the MCP servers, which the runs no longer
// need. Call Drain first to let runs reach a step boundary.
func (k *Kernel) Close(ctx context.Context) error {
	k.closed.Store(true)
	k.owner.closeLeases()
	k.owner.stopAll(errHandoff)
	k.cancel()
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	select {
	case <-done:
		return k.mcp.Close(ctx)
	case <-ctx.Done():
		// Stop the servers even so: a server left behind outlives kerneld
		// in a process group of its own. Stopping one is bounded (a few
		// seconds for a server that ignores its stdin closing).
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpStopGrace)
		defer cancel()
		return errors.Join(fmt.Errorf("close kernel: %w", ctx.Err()), k.mcp.Close(mctx))
	}
}

// mcpStopGrace bounds stopping the MCP servers once Close's own deadline
// has passed.
const mcpStopGrace = 5 * time.Second

// closeLeases refuses leases from now on and returns the sessions held
// now: no other will be.
func (o *owner) closeLeases() []*held {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	return o.sessions()
}

// awaitReleased waits until every one of hs was released, or ctx ends.
func (o *owner) awaitReleased(ctx context.Context, hs []*held) error {
	for _, h := range hs {
		select {
		case <-h.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stopAll stops the runs of every held session with cause.
func (o *owner) stopAll(cause error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range o.held {
		h.stop(cause)
	}
}
