package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kerneld/kerneld/internal/session"
)

// Problem kinds Check reports.
const (
	ProblemSeqGap           = "seq_gap"           // seqs are missing from the log
	ProblemSeqRegression    = "seq_regression"    // an event's seq is not above the one before
	ProblemLastSeqMismatch  = "last_seq_mismatch" // the session's last_seq is not its log's last event
	ProblemUnparsableEvent  = "unparsable_event"  // an event's data or metadata is not JSON
	ProblemUnknownRun       = "unknown_run"       // events of a run the session has no record of
	ProblemRunWithoutEnd    = "run_without_end"   // a run started in the log and never ended there
	ProblemDanglingToolCall = "dangling_tool_call"
	ProblemRunStateMismatch = "run_state_mismatch" // the run's record disagrees with its log
)

// Problem is one thing wrong with a session's log. Repairable says that
// Repair, which does what startup recovery does, resolves it.
type Problem struct {
	Kind       string
	Seq        int64 // the event it concerns, if one
	RunID      string
	ToolCallID string
	Detail     string
	Repairable bool
}

// Diagnosis is what Check found in a session's log.
type Diagnosis struct {
	SessionID string
	LastSeq   int64 // as the session's record says
	Events    int   // events read
	Problems  []Problem
}

// Check reads session id's whole log and its runs and reports what is
// wrong with them, changing nothing. A run this replica executes now is
// in progress, not a problem; one in progress on another replica shows
// as a run without an end (Repair answers conflict for its session).
func (k *Kernel) Check(ctx context.Context, id string) (Diagnosis, error) {
	s, err := k.GetSession(ctx, id)
	if err != nil {
		return Diagnosis{}, err
	}
	id = s.ID // the key it is stored under
	evs, err := k.readLog(ctx, id, 0)
	if err != nil {
		return Diagnosis{}, err
	}
	runs, err := k.store.ListRuns(ctx, id, session.RunQuery{})
	if err != nil {
		return Diagnosis{}, fmt.Errorf("list runs: %w", err)
	}
	d := Diagnosis{SessionID: session.PublicID(id), LastSeq: s.LastSeq, Events: len(evs)}
	d.Problems = append(d.Problems, seqProblems(evs, s.LastSeq)...)
	byRun, problems := eventsByRun(evs, runs)
	d.Problems = append(d.Problems, problems...)
	for _, r := range runs {
		d.Problems = append(d.Problems, k.runProblems(r, byRun[r.ID])...)
	}
	return d, nil
}

// readLog returns a session's events with seq > after, to the end of its
// log.
func (k *Kernel) readLog(ctx context.Context, id string, after int64) ([]session.Event, error) {
	var out []session.Event
	for {
		evs, err := k.store.ReadEvents(ctx, id, after, MaxEventPage)
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		out = append(out, evs...)
		if len(evs) < MaxEventPage {
			return out, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// seqProblems checks that the log's seqs run from 1 to lastSeq, each one
// above the one before.
func seqProblems(evs []session.Event, lastSeq int64) []Problem {
	var out []Problem
	prev := int64(0)
	for _, ev := range evs {
		switch {
		case ev.Seq <= prev:
			out = append(out, Problem{Kind: ProblemSeqRegression, Seq: ev.Seq, RunID: ev.RunID,
				Detail: fmt.Sprintf("seq %d follows seq %d", ev.Seq, prev)})
			continue
		case ev.Seq > prev+1:
			out = append(out, Problem{Kind: ProblemSeqGap, Seq: ev.Seq, RunID: ev.RunID,
				Detail: fmt.Sprintf("seqs %d to %d are missing", prev+1, ev.Seq-1)})
		}
		prev = ev.Seq
	}
	if prev != lastSeq {
		out = append(out, Problem{Kind: ProblemLastSeqMismatch, Seq: prev,
			Detail: fmt.Sprintf("the session's last_seq is %d, its log ends at seq %d", lastSeq, prev)})
	}
	return out
}

// eventsByRun groups the parsable events by run, and reports those that
// do not parse and those of runs the session has no record of.
func eventsByRun(evs []session.Event, runs []session.Run) (map[string][]session.Event, []Problem) {
	known := make(map[string]bool, len(runs))
	for _, r := range runs {
		known[r.ID] = true
	}
	byRun := map[string][]session.Event{}
	var out []Problem
	for _, ev := range evs {
		if ev.Type == "" || !json.Valid(ev.Data) || (len(ev.Meta) > 0 && !json.Valid(ev.Meta)) {
			out = append(out, Problem{Kind: ProblemUnparsableEvent, Seq: ev.Seq, RunID: ev.RunID,
				Detail: fmt.Sprintf("event %d (%q) does not parse", ev.Seq, ev.Type)})
			continue
		}
		if !known[ev.RunID] {
			if len(byRun[ev.RunID]) == 0 {
				out = append(out, Problem{Kind: ProblemUnknownRun, Seq: ev.Seq, RunID: ev.RunID,
					Detail: fmt.Sprintf("event %d belongs to run %q, which the session has no record of", ev.Seq, ev.RunID)})
			}
		}
		byRun[ev.RunID] = append(byRun[ev.RunID], ev)
	}
	return byRun, out
}

// runProblems compares run r's record with its events.
func (k *Kernel) runProblems(r session.Run, evs []session.Event) []Problem {
	if len(evs) == 0 && r.StartSeq == 0 {
		return nil // never started (queued, steered, cancelled in the queue)
	}
	rp := replayRun(evs)
	unfinished := r.State == session.RunRunning || r.State == session.RunWaitingInput
	if unfinished && k.runsHere(r) {
		return nil // in progress
	}
	var out []Problem
	switch {
	case rp.terminal == nil:
		out = append(out, Problem{Kind: ProblemRunWithoutEnd, RunID: r.ID, Seq: r.StartSeq, Repairable: r.State == session.RunRunning,
			Detail: fmt.Sprintf("run %s started and never ended in the log; its record says %s", r.ID, r.State)})
	case unfinished || endingOf(rp.terminal).runState != r.State:
		out = append(out, Problem{Kind: ProblemRunStateMismatch, RunID: r.ID, Seq: rp.terminal.Seq, Repairable: r.State == session.RunRunning,
			Detail: fmt.Sprintf("run %s ended %s in the log; its record says %s", r.ID, endingOf(rp.terminal).runState, r.State)})
	}
	for _, c := range rp.calls {
		if c.result == nil {
			out = append(out, Problem{Kind: ProblemDanglingToolCall, RunID: r.ID, ToolCallID: c.id, Repairable: r.State == session.RunRunning && rp.terminal == nil,
				Detail: fmt.Sprintf("tool call %s (%s) of run %s has no result", c.id, c.name, r.ID)})
		}
	}
	return out
}

// runsHere reports whether this replica executes run r now.
func (k *Kernel) runsHere(r session.Run) bool {
	h := k.owner.get(r.SessionID)
	if h == nil {
		return false
	}
	ar := h.current()
	return ar != nil && ar.run.ID == r.ID
}
