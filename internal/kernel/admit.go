package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Admission. Every session and run the kernel creates passes one of the
// three functions below against its tenant's quotas (Quotas), whatever
// asked for it, so that no route, tool or schedule goes around a quota,
// and every refusal is the same error (429 with Retry-After over HTTP):
//
//   - admitSession, for a session about to be stored: CreateSession (POST
//     /sessions; POST /run, the AG-UI and AI SDK routes naming a new
//     thread, through EnsureSession; spawn_agent's children) and
//     createFork (fork, regenerate);
//   - admitRun, for a run about to be posted, in Run (tokens per day, runs
//     per minute): POST /sessions/{id}/run, POST /run, the AG-UI and AI
//     SDK routes, regenerate's run, Compact's run, spawned children's
//     runs, schedules firing;
//   - a concurrent run's place for a run about to execute: startNew takes
//     it or refuses the request (a run posted to a busy session waits in
//     its queue without one); startQueued waits for it (admitStart).
//
// Deliberately not admitted:
//   - a run continued after a crash, a take-over or a shutdown
//     (runcontinue.go): it was admitted when it was posted and its start
//     is logged; refusing it now would break the promise its 202 made.
//     It is counted (Quotas.RunStarted) while it executes.
//   - the run that writes a fork's copied history (createFork): it calls
//     no model and has ended before the fork is returned; the fork itself
//     is admitted as a session.

// admitSession admits a session of the caller's tenant; done, called once
// the session is stored or failed to be, lets the tenant's next one in.
func (k *Kernel) admitSession(ctx context.Context) (done func(), err error) {
	tenant := TenantFrom(ctx)
	return k.quotas.AdmitSession(ctx, tenant, func(ctx context.Context) (int, error) {
		n, err := k.store.CountSessions(ctx, tenant)
		if err != nil {
			return 0, fmt.Errorf("count sessions: %w", err)
		}
		return n, nil
	})
}

// admitStart waits for a concurrent run's place for run, queued on h's
// session of tenant, and returns it (nil when the quota store failed: the
// run starts, counted as it executes, rather than wait for the store). ok
// is false when the run must not start after all: the session's context
// ended, or the run was cancelled while it waited (then it is ended so).
func (k *Kernel) admitStart(h *held, tenant string, run session.Run) (done func(executing bool), ok bool) {
	ctx := context.WithoutCancel(h.ctx)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		done, err := k.quotas.AdmitStart(ctx, tenant)
		switch {
		case err == nil:
			return done, true
		case !errors.Is(err, errdefs.ErrExhausted):
			k.log.Warn("admit a queued run", "session", h.id, "run", run.ID, "err", err)
			return nil, true
		}
		t := time.NewTimer(wait)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return nil, false
		case <-h.wake: // a cancel, maybe
			t.Stop()
		case <-t.C:
		}
		if k.checkOpen() != nil {
			return nil, false
		}
		cur, err := k.store.GetRun(ctx, h.id, run.ID)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			return nil, false // deleted with its session
		case err == nil && cur.State != session.RunQueued:
			return nil, false
		case err == nil && cur.CancelRequested:
			k.endQueued(h, cur, session.RunCancelled, nil)
			return nil, false
		}
	}
}
