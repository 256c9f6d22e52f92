package kernel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/session"
)

// BusyPolicy says what to do with input posted while a run is active.
type BusyPolicy string

// Busy policies.
const (
	BusyReject    BusyPolicy = "reject"
	BusyQueue     BusyPolicy = "queue"
	BusyInterrupt BusyPolicy = "interrupt"
	BusySteer     BusyPolicy = "steer"
)

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

// RunRequest is input for a session.
type RunRequest struct {
	Input string
	// Images are the pictures the input carries after its text, checked
	// by the caller (images.Library.Check); Run keeps them.
	Images         []images.Input
	imageRefs      []session.ImageRef // what Run kept of Images
	IfBusy         BusyPolicy         // "" means BusyReject
	IdempotencyKey string
	// Overrides are model settings for this run alone, within what the
	// agent allows.
	Overrides *session.Overrides
	kind      string // session.RunKindCompaction for Compact's run, RunKindClear for Clear's: neither has input
	// clearMemory asks a clear run to clear the session's memory too.
	clearMemory bool
	// traceParent is the traceparent of the request that accepts the run.
	traceParent string
	// ID is the run's id when the client chose it (AG-UI runId); "" lets
	// kerneld choose.
	ID string
	// AGUI holds what an AG-UI client adds to a run; see session.RunExt.
	AGUI AGUIRun
	// Agent names the agent to run as, when not the session's own (see
	// peers.go); "" runs the session's agent.
	Agent string
	// Source says where the run's input came from (session.RunSourceAPI,
	// session.RunSourceSchedule, ...).
	Source string
	// background marks a background child's run (spawn_agent wait:
	// false); childResult the parent's run that hears how one ended.
	background  bool
	childResult *session.ChildResult
}

// AGUIRun is what an AG-UI RunAgentInput adds to a run.
type AGUIRun struct {
	UserMessageID string
	Context       []session.ContextEntry
	AgentState    json.RawMessage
	ClientTools   []session.ClientTool
	ToolResults   []session.ToolResult // with them, Input may be empty
}

// Run accepts input for a session and starts a run: it persists the run
// and the user message, emits RUN_STARTED and the echoed input, and starts
// the agent loop, which outlives ctx. On a busy session it applies the
// request's busy policy instead. With an Idempotency-Key seen within the
// window it returns the original run and replayed is true.
func (k *Kernel) Run(ctx context.Context, sessionID string, req RunRequest) (session.Run, bool, error) {
	if err := k.validateRunRequest(req); err != nil {
		return session.Run{}, false, err
	}
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return session.Run{}, false, err
	}
	spec, err := k.runAgent(s, req.Agent)
	if err != nil {
		return session.Run{}, false, err
	}
	if req.Agent == s.Agent {
		req.Agent = "" // the session's own
	}
	if req.Agent != "" {
		if err := checkGuestMCP(s, spec); err != nil { // its file may have changed since the session listed it
			return session.Run{}, false, err
		}
	}
	if err := checkOverrides(spec, req.Overrides); err != nil {
		return session.Run{}, false, err
	}
	if req, err = k.keepImages(ctx, s, req); err != nil {
		return session.Run{}, false, err
	}
	admitted, err := k.quotas.AdmitRun(ctx, s.Tenant) // see admit.go
	if err != nil {
		return session.Run{}, false, err
	}
	run, replayed, err := k.acceptAdmitted(ctx, s, spec, req)
	admitted(err == nil && !replayed)
	return run, replayed, err
}

// acceptAdmitted accepts req, admitted, for session s: it starts it,
// queues it or applies its busy policy, waiting out a run that is ending
// or an owner about to let the session go.
func (k *Kernel) acceptAdmitted(ctx context.Context, s session.Session, spec agents.Spec, req RunRequest) (session.Run, bool, error) {
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		run, replayed, err := k.accept(ctx, s, spec, req)
		if err == nil && !replayed && run.State == session.RunQueued && run.IfBusy == "" {
			return k.awaitStart(ctx, run)
		}
		if ending, ok := errors.AsType[*runEndingError](err); ok {
			// The active run has logged its end: a client that posts the
			// moment it sees RUN_FINISHED must find the session free.
			if err := k.awaitEnd(ctx, s.ID, ending.runID); err != nil {
				return session.Run{}, false, err
			}
			continue
		}
		if !errors.Is(err, errOwnerLeaving) {
			return run, replayed, err
		}
		// Another replica holds the idle session's lease a moment longer.
		if err := sleep(ctx, wait); err != nil {
			return session.Run{}, false, err
		}
	}
}

// awaitStart waits, a little, for the session's driver to start run, which
// was posted to a session found idle, and returns it as it is then. If a
// run of another replica got in first, run waits behind it, queued.
func (k *Kernel) awaitStart(ctx context.Context, run session.Run) (session.Run, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	got, err := k.waitRun(wctx, run.SessionID, run.ID, func(r session.Run) bool { return r.State != session.RunQueued })
	if err != nil && ctx.Err() == nil {
		return got, false, nil // still queued: as it is
	}
	return got, false, err
}

// startWait bounds how long a request waits for its run to start on a
// session found idle.
const startWait = 2 * time.Second

// runEndingError says the session's active run has logged its end and is
// recording it.
type runEndingError struct{ runID string }

func (e *runEndingError) Error() string { return "run " + e.runID + " is ending" }

// ending reports whether run runID of session s has logged its terminal
// event, though its record did not say it ended when the caller read it.
// A run no longer active here may have recorded its end since that read:
// then it counts as ending if nothing else keeps the session busy (a
// queued run the driver is about to start does).
func (k *Kernel) ending(ctx context.Context, s session.Session, runID string) bool {
	if h := k.owner.get(s.ID); h != nil {
		if ar := h.current(); ar != nil && ar.run.ID == runID {
			return ar.ending.Load()
		}
		run, err := k.store.GetRun(ctx, s.ID, runID)
		if err != nil || !run.State.Terminal() {
			return false
		}
		busy, err := k.unfinishedRun(ctx, s)
		return err == nil && busy == ""
	}
	evs, err := k.store.ReadEvents(ctx, s.ID, s.LastSeq-1, 1)
	return err == nil && len(evs) == 1 && evs[0].RunID == runID && evs[0].Type.Ends()
}

// awaitEnd waits, a little, for run runID, which has logged its end, to
// record it.
func (k *Kernel) awaitEnd(ctx context.Context, sessionID, runID string) error {
	wctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	_, err := k.waitRun(wctx, sessionID, runID, func(r session.Run) bool {
		return ended(r) || k.paused(sessionID, runID) // then accept refuses the request
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// errOwnerLeaving says an idle session's lease is still held elsewhere, by
// an owner about to release it.
var errOwnerLeaving = errors.New("the session's owner is releasing it")

// accept starts req as a run of session s, or applies its busy policy. It
// holds the session's stripe lock: within this process no other request
// can start a run of the session meanwhile, and the session's driver
// cannot release it.
func (k *Kernel) accept(ctx context.Context, s session.Session, spec agents.Spec, req RunRequest) (session.Run, bool, error) {
	req.traceParent = k.traceParent(ctx)
	unlock := k.lockSession(s.ID)
	defer unlock()
	if prev, ok, err := k.findIdempotent(ctx, s.ID, req); err != nil || ok {
		return prev, ok, err
	}
	s, err := k.store.GetSession(ctx, s.ID)
	if err != nil {
		return session.Run{}, false, fmt.Errorf("get session: %w", err)
	}
	if !s.State.AcceptsRuns() {
		return session.Run{}, false, errdefs.New(errdefs.ErrConflict, errdefs.CodeSessionClosed, "session %s is closed", session.PublicID(s.ID))
	}
	busy, err := k.unfinishedRun(ctx, s)
	if err != nil {
		return session.Run{}, false, err
	}
	if busy != "" {
		if req.IdempotencyKey != "" {
			// Another replica may have accepted this very request since the
			// look above, and its run is what makes the session busy.
			if prev, ok, err := k.findIdempotent(ctx, s.ID, req); err != nil || ok {
				return prev, ok, err
			}
		}
		if k.paused(s.ID, busy) {
			return session.Run{}, false, errPaused(s.ID, busy)
		}
		if k.ending(ctx, s, busy) {
			return session.Run{}, false, &runEndingError{runID: busy}
		}
		return k.whileBusy(ctx, s, busy, req)
	}
	h, fresh, err := k.owner.hold(ctx, s.ID)
	switch {
	case errors.Is(err, session.ErrLeaseHeld):
		return session.Run{}, false, errOwnerLeaving
	case err != nil:
		return session.Run{}, false, err
	case !fresh:
		// Held here by a driver about to go idle: it starts what is queued.
		return k.post(ctx, s, req, "")
	}
	return k.startNew(ctx, h, s, spec, req)
}

// unfinishedRun returns the id of a run of session s that is running,
// waiting for approval or queued: the session is busy. The session's
// active run is named first.
func (k *Kernel) unfinishedRun(ctx context.Context, s session.Session) (string, error) {
	runs, err := k.store.ListRuns(ctx, s.ID, session.RunQuery{Limit: 1,
		States: []session.RunState{session.RunRunning, session.RunWaitingInput, session.RunQueued}})
	switch {
	case err != nil:
		return "", fmt.Errorf("list runs: %w", err)
	case len(runs) == 0:
		return "", nil
	case s.ActiveRunID != "":
		return s.ActiveRunID, nil
	}
	return runs[0].ID, nil
}

// post records req as a run queued on session s, posted with policy
// ifBusy, and tells the session's owner, which starts it or applies the
// policy. The caller holds the session's stripe lock.
func (k *Kernel) post(ctx context.Context, s session.Session, req RunRequest, ifBusy BusyPolicy) (session.Run, bool, error) {
	run := k.newRun(s.ID, req, session.RunQueued)
	run.IfBusy = string(ifBusy)
	if err := k.store.CreateRun(ctx, run, k.runConstraints(k.limits.MaxQueued)); err != nil {
		return k.duplicate(err)
	}
	if queuedRecorded != nil {
		queuedRecorded(run)
	}
	switch ifBusy {
	case BusySteer:
		k.steerHere(s.ID, run)
	case BusyInterrupt:
		k.interruptHere(s.ID, run)
	}
	if err := k.ensureLocked(ctx, s.ID); err != nil {
		k.log.Warn("tell the session's owner", "session", s.ID, "err", err) // the take-over scan finds it
	}
	return run, false, nil
}

// runConstraints are the checks a new run's insert makes: the
// idempotency window, and the queue bound for a queued run.
func (k *Kernel) runConstraints(maxQueued int) session.RunConstraints {
	return session.RunConstraints{IdempotentSince: k.now().Add(-k.limits.IdempotencyWindow), MaxQueued: maxQueued}
}

// duplicate turns a CreateRun error into Run's answer: a run created with
// the same idempotency key, by a request racing this one, is replayed.
func (k *Kernel) duplicate(err error) (session.Run, bool, error) {
	if dup, ok := errors.AsType[*session.DuplicateRunError](err); ok {
		return dup.Run, true, nil
	}
	if errdefs.CodeOf(err) == errdefs.CodeQueueFull {
		return session.Run{}, false, err
	}
	return session.Run{}, false, fmt.Errorf("create run: %w", err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// validateRunRequest checks a run request's shape.
func (k *Kernel) validateRunRequest(req RunRequest) error {
	var v *errdefs.ValidationError
	switch {
	case req.Input == "" && len(req.Images) == 0 && len(req.imageRefs) == 0 && req.kind == "" && len(req.AGUI.ToolResults) == 0:
		v = v.Add("input", "required")
	case len(req.Input) > k.limits.MaxInputBytes:
		v = v.Add("input", fmt.Sprintf("longer than %d bytes", k.limits.MaxInputBytes))
	}
	if len(req.IdempotencyKey) > MaxIdempotencyKeyLen {
		v = v.Add("Idempotency-Key", fmt.Sprintf("longer than %d characters", MaxIdempotencyKeyLen))
	}
	if err := v.Err(); err != nil {
		return err
	}
	switch req.IfBusy {
	case "", BusyReject, BusyQueue, BusyInterrupt, BusySteer:
		return nil
	}
	return errdefs.Invalid("if_busy", `must be one of "reject", "queue", "interrupt", "steer"`)
}

// findIdempotent returns the run created with req's key within the
// window. The same key with another input is a mistake the client must
// hear about: the IETF Idempotency-Key draft answers it 422.
func (k *Kernel) findIdempotent(ctx context.Context, sessionID string, req RunRequest) (session.Run, bool, error) {
	if req.IdempotencyKey == "" {
		return session.Run{}, false, nil
	}
	since := k.now().Add(-k.limits.IdempotencyWindow)
	r, err := k.store.FindRunByIdempotencyKey(ctx, sessionID, req.IdempotencyKey, since)
	if errors.Is(err, errdefs.ErrNotFound) {
		return session.Run{}, false, nil
	}
	if err != nil {
		return session.Run{}, false, fmt.Errorf("find run by idempotency key: %w", err)
	}
	if !sameInput(r, req) {
		return session.Run{}, false, errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeIdempotencyKeyReused,
			"Idempotency-Key %q was used for run %s with another input", req.IdempotencyKey, r.ID).With("run_id", r.ID)
	}
	return r, true, nil
}

// GetRun returns one run of a session.
func (k *Kernel) GetRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	s, err := k.GetSession(ctx, sessionID)
	if err != nil {
		return session.Run{}, err
	}
	sessionID = s.ID // the key it is stored under
	notFound := errdefs.New(errdefs.ErrNotFound, errdefs.CodeRunNotFound, "run %q not found in session %s", runID, session.PublicID(sessionID))
	if !validID(runID) && !session.ValidClientID(runID) {
		return session.Run{}, notFound
	}
	k.awaitRecordedEnd(ctx, sessionID, runID)
	r, err := k.store.GetRun(ctx, sessionID, runID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return session.Run{}, notFound
	}
	if err != nil {
		return session.Run{}, fmt.Errorf("get run: %w", err)
	}
	return r, nil
}

// recordedEndWait bounds how long reading a run waits for its end to be
// recorded; a store that stalls there leaves the run paused, not ended.
const recordedEndWait = 2 * time.Second

// awaitRecordedEnd waits, when this replica runs runID and has logged its
// end, until the run's goroutine has recorded the end on the run. A run's
// terminal event is logged, and streamed, a moment before its record says
// it ended: without the wait a client that saw RUN_FINISHED and then read
// the run could find it still running.
func (k *Kernel) awaitRecordedEnd(ctx context.Context, sessionID, runID string) {
	h := k.owner.get(sessionID)
	if h == nil {
		return
	}
	ar := h.current()
	if ar == nil || ar.run.ID != runID || !ar.endLogged.Load() {
		return
	}
	timer := time.NewTimer(recordedEndWait)
	defer timer.Stop()
	select {
	case <-ar.done:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// ListRuns returns a page of a session's runs, newest first.
func (k *Kernel) ListRuns(ctx context.Context, sessionID string, page PageRequest) (Page[session.Run], error) {
	return k.ListRunsWhere(ctx, sessionID, RunFilter{}, page)
}

// CancelRun stops a run and waits until it has recorded its end; the run
// ends cancelled with a valid history. A queued run never starts, and the
// stream of the run it waited behind says so. Cancelling a run that has
// already ended changes nothing and returns it as it is. The run may be
// running on another replica: the request is recorded on the run, and its
// session's owner, the only writer of its state, acts on it.
func (k *Kernel) CancelRun(ctx context.Context, sessionID, runID string) (session.Run, error) {
	r, err := k.GetRun(ctx, sessionID, runID)
	if err != nil || r.State.Terminal() {
		return r, err
	}
	if k.paused(sessionID, runID) {
		return session.Run{}, errPaused(sessionID, runID)
	}
	return k.cancelRun(ctx, r)
}

// cancelRun is CancelRun without the tenant check, for a run the kernel
// itself stops (a spawned child's).
func (k *Kernel) cancelRun(ctx context.Context, r session.Run) (session.Run, error) {
	err := k.updateRun(ctx, &r, func(cur *session.Run) error {
		if cur.State.Terminal() || cur.CancelRequested {
			return errUnchanged
		}
		cur.CancelRequested = true
		return nil
	})
	if err != nil {
		return session.Run{}, err
	}
	k.stopHere(r.SessionID, r.ID, errCancelled)
	if err := k.ensure(ctx, r.SessionID); err != nil {
		return session.Run{}, err
	}
	return k.awaitCancelled(ctx, r)
}

// modelOf returns the model run r of session s uses: the run's choice, the
// session's, or the agent's own; a compaction run's is the one that writes
// the summary.
func (k *Kernel) modelOf(spec agents.Spec, s session.Session, r session.Run) string {
	model := settingsOf(spec, s, r).Model
	if r.Kind == session.RunKindCompaction {
		model = cmp.Or(spec.CompactionOrDefault().Model, model)
	}
	return model
}

// runTimeout returns the agent's run timeout, or a day when unset.
func runTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return 24 * time.Hour
	}
	return d
}
