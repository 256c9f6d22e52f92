package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// resumeAnswer is one entry of RunAgentInput.resume, read: the decision on
// the approval interrupt interruptID (a tool call id).
type resumeAnswer struct {
	interruptID string
	approve     bool
	reason      string
}

// readResume reads resume[i]: {interruptId, status: "resolved", payload:
// {decision: "approve"|"deny", reason?}}, or status "cancelled", a denial.
func readResume(i int, raw json.RawMessage) (resumeAnswer, *fieldProblem) {
	at := func(f string) string { return fmt.Sprintf("resume[%d]%s", i, f) }
	var e struct {
		InterruptID *string         `json:"interruptId"`
		Status      *string         `json:"status"`
		Payload     json.RawMessage `json:"payload"`
	}
	if err := unmarshalPart(raw, &e, looseJSON); err != nil {
		return resumeAnswer{}, &fieldProblem{at(""), "must be an object with interruptId, status and payload"}
	}
	if e.InterruptID == nil || *e.InterruptID == "" {
		return resumeAnswer{}, &fieldProblem{at(".interruptId"), "required"}
	}
	out := resumeAnswer{interruptID: *e.InterruptID}
	switch {
	case e.Status == nil:
		return resumeAnswer{}, &fieldProblem{at(".status"), "required"}
	case *e.Status == "cancelled":
		out.reason = "cancelled"
		return out, nil
	case *e.Status != "resolved":
		return resumeAnswer{}, &fieldProblem{at(".status"), `must be "resolved" or "cancelled"`}
	}
	var p struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	if len(e.Payload) == 0 || unmarshalPart(e.Payload, &p, strictJSON) != nil {
		return resumeAnswer{}, &fieldProblem{at(".payload"), `must be {"decision": "approve" or "deny", "reason"?: string}`}
	}
	switch p.Decision {
	case kernel.DecisionApprove:
		out.approve = true
	case kernel.DecisionDeny:
	default:
		return resumeAnswer{}, &fieldProblem{at(".payload.decision"), `must be "approve" or "deny"`}
	}
	out.reason = p.Reason
	return out, nil
}

// resumeAGUI answers the interrupts of the run thread sess waits on and
// streams the continuation of that run as a new AG-UI run, in.runID.
// in.runID may be any id: a new one, as AG-UI's own example sends, or the
// interrupted run's, as CopilotKit's useInterrupt sends; a request with
// resume is an answer, never a retry to replay. Every interrupt pending
// must be answered, and the messages may add nothing: the run goes on
// from where it stopped. An answer that cannot apply is a 409 saying why.
func (s *Server) resumeAGUI(w http.ResponseWriter, r *http.Request, sess session.Session, in aguiRun) error {
	run, pending, err := s.waitingApprovals(r.Context(), sess)
	if err != nil {
		return err
	}
	if err := s.checkAnswers(r.Context(), sess, in, pending); err != nil {
		return err
	}
	if err := s.noNewMessages(r, sess.ID, in.messages); err != nil {
		return err
	}
	for _, a := range in.resume {
		if _, err := s.kernel.Decide(r.Context(), sess.ID, run.ID, a.interruptID, a.approve, a.reason); err != nil {
			if errdefs.CodeOf(err) == errdefs.CodeApprovalDecided { // another request answered it meanwhile
				return notPending("resume: interrupt %q: %v", a.interruptID, err)
			}
			return err
		}
	}
	var after int64
	for _, a := range pending {
		after = max(after, a.RequestSeq)
	}
	view := s.newAGUIView(run, in.runID, in.legacy)
	view.preface = runStartedFrame(run, in.runID, after)
	w.Header().Set("Location", "/sessions/"+session.PublicID(run.SessionID)+"/runs/"+run.ID)
	return s.streams.serve(w, r, s.kernel, streamRequest{sessionID: run.SessionID, after: after, runID: run.ID, aguiView: view})
}

// waitingApprovals returns the run thread sess waits on and its pending
// approvals; none when it waits on nothing.
func (s *Server) waitingApprovals(ctx context.Context, sess session.Session) (session.Run, []kernel.Approval, error) {
	if sess.ActiveRunID == "" {
		return session.Run{}, nil, nil
	}
	run, err := s.kernel.GetRun(ctx, sess.ID, sess.ActiveRunID)
	if err != nil {
		return session.Run{}, nil, err
	}
	pending, err := s.pendingApprovals(ctx, run)
	return run, pending, err
}

// checkAnswers checks that in.resume decides exactly the pending
// approvals of thread sess: an answer to anything else is a conflict that
// says why, a pending approval left unanswered a bad request.
func (s *Server) checkAnswers(ctx context.Context, sess session.Session, in aguiRun, pending []kernel.Approval) error {
	open := make(map[string]bool, len(pending))
	for _, a := range pending {
		open[a.ToolCallID] = true
	}
	for _, a := range in.resume {
		if !open[a.interruptID] {
			return s.whyNotPending(ctx, sess, in.runID, a.interruptID, pending)
		}
		delete(open, a.interruptID)
	}
	var missing []string
	for _, a := range pending {
		if open[a.ToolCallID] {
			missing = append(missing, a.ToolCallID)
		}
	}
	if len(missing) > 0 {
		return errdefs.Invalid("resume", "every pending interrupt needs an answer; unanswered: "+strings.Join(missing, ", "))
	}
	return nil
}

// lookBackRuns bounds how many of a thread's latest runs whyNotPending
// searches for an interrupt it is not waiting on.
const lookBackRuns = 20

// whyNotPending is the conflict of an answer to interrupt id, which
// thread sess is not waiting on: it was decided already, its run ended
// without a decision, or it was never asked (the thread may be waiting on
// others: pending). It looks in the run the request names, then in the
// thread's latest runs.
func (s *Server) whyNotPending(ctx context.Context, sess session.Session, runID, id string, pending []kernel.Approval) error {
	runs := []string{runID}
	if page, err := s.kernel.ListRuns(ctx, sess.ID, kernel.PageRequest{Limit: lookBackRuns}); err == nil {
		for _, run := range page.Items {
			runs = append(runs, run.ID)
		}
	}
	for _, rid := range runs {
		approvals, err := s.kernel.Approvals(ctx, sess.ID, rid)
		if err != nil {
			continue // not a run of this thread: the client's own runId
		}
		for _, a := range approvals {
			switch {
			case a.ToolCallID != id:
			case a.State == kernel.ApprovalCancelled:
				return notPending("resume: interrupt %q of run %s can no longer be answered: the run ended before a decision", id, rid)
			case a.State == kernel.ApprovalPending: // decided, the decision not logged yet
				return notPending("resume: interrupt %q was already answered; its decision is on its way to run %s", id, rid)
			default:
				return notPending("resume: interrupt %q was already answered (%s at %s); to read what followed, GET /sessions/%s/events?run_id=%s",
					id, a.State, a.DecidedAt.UTC().Format(time.RFC3339), session.PublicID(sess.ID), rid)
			}
		}
	}
	if len(pending) == 0 {
		return notPending("resume: interrupt %q was never asked on this thread, and it waits on no interrupt", id)
	}
	ids := make([]string, len(pending))
	for i, a := range pending {
		ids[i] = a.ToolCallID
	}
	return notPending("resume: interrupt %q is not one this thread waits on; it waits on %s", id, strings.Join(ids, ", "))
}

// notPending is the 409 of an answer to an interrupt that is not pending.
func notPending(format string, args ...any) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeInterruptNotPending, format, args...)
}

// noNewMessages checks that a resuming client's messages agree with the
// history and add nothing to it.
func (s *Server) noNewMessages(r *http.Request, sessionID string, msgs []clientMessage) error {
	history, err := s.history(r, sessionID)
	if err != nil {
		return err
	}
	fresh, err := freshMessages(msgs, history)
	if err != nil {
		return err
	}
	if len(fresh) > 0 {
		return errdefs.Invalid(fmt.Sprintf("messages[%d]", fresh[0].index), "a run that resumes interrupts takes no new messages")
	}
	return nil
}
