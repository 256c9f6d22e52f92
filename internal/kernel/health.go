package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// DefaultStallAfter is how long a running run may log nothing before it
// counts as stalled, unless configured otherwise.
const DefaultStallAfter = 2 * time.Minute

// SessionView is what the API shows of a session beyond its record.
type SessionView struct {
	Status session.Status
	// QueuedRuns counts the session's runs waiting to start.
	QueuedRuns int
}

// SessionStatuses returns the status of each of ss (see SessionViews).
func (k *Kernel) SessionStatuses(ctx context.Context, ss []session.Session) ([]session.Status, error) {
	views, err := k.SessionViews(ctx, ss)
	if err != nil {
		return nil, err
	}
	out := make([]session.Status, len(views))
	for i, v := range views {
		out[i] = v.Status
	}
	return out, nil
}

// SessionViews returns the status (see session.Status) and queued runs
// of each of ss. The record gives most; a running session is stalled when
// its log's newest event says so, and an idle one is queued when it has a
// run waiting to start. It reads the newest event of each running session
// and, once for all of ss, the runs queued in the store, which are few:
// only busy sessions queue.
func (k *Kernel) SessionViews(ctx context.Context, ss []session.Session) ([]SessionView, error) {
	out := make([]SessionView, len(ss))
	queued, err := k.queuedSessions(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ss {
		s := &ss[i]
		out[i] = SessionView{Status: session.StatusOf(s), QueuedRuns: queued[s.ID]}
		switch out[i].Status {
		case session.StatusRunning:
			stalled, err := k.stalled(ctx, s.ID, s.LastSeq)
			if err != nil {
				return nil, err
			}
			if stalled {
				out[i].Status = session.StatusStalled
			}
		case session.StatusIdle, session.StatusFailed:
			if queued[s.ID] > 0 {
				out[i].Status = session.StatusQueued
			}
		}
	}
	return out, nil
}

// SessionStatus returns the status of session s.
func (k *Kernel) SessionStatus(ctx context.Context, s session.Session) (session.Status, error) {
	st, err := k.SessionStatuses(ctx, []session.Session{s})
	if err != nil {
		return "", err
	}
	return st[0], nil
}

// RunStatuses returns the status of each of runs: a running run is
// stalled when its session's newest event says so.
func (k *Kernel) RunStatuses(ctx context.Context, runs []session.Run) ([]session.Status, error) {
	out := make([]session.Status, len(runs))
	for i := range runs {
		out[i] = session.RunStatusOf(&runs[i])
		if out[i] != session.StatusRunning {
			continue
		}
		// The run's SessionID is the key its session is stored under,
		// whatever id the client named it by.
		s, err := k.store.GetSession(ctx, runs[i].SessionID)
		if err != nil {
			return nil, fmt.Errorf("get session: %w", err)
		}
		if s.ActiveRunID != runs[i].ID {
			continue
		}
		stalled, err := k.stalled(ctx, s.ID, s.LastSeq)
		if err != nil {
			return nil, err
		}
		if stalled {
			out[i] = session.StatusStalled
		}
	}
	return out, nil
}

// stalled reports whether the run running in session id is stalled,
// judging by the newest event of its log, lastSeq.
func (k *Kernel) stalled(ctx context.Context, id string, lastSeq int64) (bool, error) {
	if lastSeq == 0 {
		return false, nil
	}
	evs, err := k.store.ReadEvents(ctx, id, lastSeq-1, 1)
	if err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	if len(evs) == 0 {
		return false, nil
	}
	return session.Stalls(&evs[0], k.now(), k.stallAfter), nil
}

// queuedSessions returns how many queued runs each session with one has.
func (k *Kernel) queuedSessions(ctx context.Context) (map[string]int, error) {
	runs, err := k.store.ListRunsByState(ctx, session.RunQueued)
	if err != nil {
		return nil, fmt.Errorf("list queued runs: %w", err)
	}
	out := make(map[string]int, len(runs))
	for _, r := range runs {
		out[r.SessionID]++
	}
	return out, nil
}

// stallLoop watches the runs this replica executes, a quarter of the
// stall time apart, and has CUSTOM kerneld.run.stalled logged once in
// each run that has logged nothing for the stall time, unless it waits
// for a person's decision: it posts the notice, and the run's goroutine,
// waiting on its model or its tools, logs it. The notice is in the log,
// so every replica's streams and statuses see it.
func (k *Kernel) stallLoop() {
	t := time.NewTicker(min(max(k.stallAfter/4, 5*time.Millisecond), 15*time.Second))
	defer t.Stop()
	noticed := map[*activeRun]bool{}
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
		live := map[*activeRun]bool{}
		for _, ar := range k.owner.running() {
			live[ar] = true
			if noticed[ar] || k.now().Sub(ar.events.quietSince()) < k.stallAfter {
				continue
			}
			noticed[ar] = true
			ar.notices.post(session.Custom(session.CustomRunStalled, map[string]any{ // a run that ended meanwhile refuses it
				"runId": ar.run.ID, "stallAfterMs": k.stallAfter.Milliseconds(),
			}))
		}
		for ar := range noticed {
			if !live[ar] {
				delete(noticed, ar)
			}
		}
	}
}

// running returns the runs this replica executes that do not wait for a
// person's decision or for the store.
func (o *owner) running() []*activeRun {
	hs := o.sessions()
	var out []*activeRun
	for _, h := range hs {
		h.mu.Lock()
		if ar := h.active; ar != nil && len(ar.awaiting) == 0 && !ar.paused.Load() {
			out = append(out, ar)
		}
		h.mu.Unlock()
	}
	return out
}

// quietSince returns when the writer last took an event to log; the
// writer's creation before the first.
func (w *eventWriter) quietSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastQueued
}
