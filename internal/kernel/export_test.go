package kernel

import (
	"context"
	"testing"

	"github.com/kerneld/kerneld/internal/session"
)

// OnQueuedStart makes f run, until the test ends, as each queued run is
// about to start: after handoff made it its session's active run and
// before it starts; ctx is the run's. Call it before creating the kernel,
// so that the kernel is closed before f is removed.
func OnQueuedStart(tb testing.TB, f func(ctx context.Context, run session.Run)) {
	beforeQueuedStart = f
	tb.Cleanup(func() { beforeQueuedStart = nil })
}

// OnQueuedRecorded makes f run, until the test ends, as each queued run has
// been stored and before it joins its queue; the poster holds the session's
// lock meanwhile. Call it before creating the kernel.
func OnQueuedRecorded(tb testing.TB, f func(run session.Run)) {
	queuedRecorded = f
	tb.Cleanup(func() { queuedRecorded = nil })
}

// OnRunEnded makes f run, until the test ends, on a session's driver once
// its run has stopped and before the driver picks what runs next. Call it
// before creating the kernel.
func OnRunEnded(tb testing.TB, f func(ended session.Run)) {
	afterRunEnded = f
	tb.Cleanup(func() { afterRunEnded = nil })
}

// OnDrainAsked makes f run, until the test ends, once Drain has asked every
// run to leave and before it waits for them. Call it before creating the
// kernel.
func OnDrainAsked(tb testing.TB, f func()) {
	drainAsked = f
	tb.Cleanup(func() { drainAsked = nil })
}
