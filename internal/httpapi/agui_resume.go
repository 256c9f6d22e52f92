package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

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
// Every interrupt pending must be answered, and the messages may add
// nothing: the run goes on from where it stopped.
func (s *Server) resumeAGUI(w http.ResponseWriter, r *http.Request, sess session.Session, in aguiRun) error {
	if sess.ActiveRunID == "" {
		return errdefs.Invalid("resume", "this thread has no pending interrupt")
	}
	run, err := s.kernel.GetRun(r.Context(), sess.ID, sess.ActiveRunID)
	if err != nil {
		return err
	}
	pending, err := s.pendingApprovals(r.Context(), run)
	if err != nil {
		return err
	}
	if err := checkAnswers(in.resume, pending); err != nil {
		return err
	}
	if err := s.noNewMessages(r, sess.ID, in.messages); err != nil {
		return err
	}
	for _, a := range in.resume {
		if _, err := s.kernel.Decide(r.Context(), sess.ID, run.ID, a.interruptID, a.approve, a.reason); err != nil {
			return err
		}
	}
	var after int64
	for _, a := range pending {
		after = max(after, a.RequestSeq)
	}
	view := s.newAGUIView(run, in.runID)
	view.preface = runStartedFrame(run, in.runID, after)
	w.Header().Set("Location", "/sessions/"+session.PublicID(run.SessionID)+"/runs/"+run.ID)
	return s.streams.serve(w, r, s.kernel, streamRequest{sessionID: run.SessionID, after: after, runID: run.ID, aguiView: view})
}

// checkAnswers checks that answers decide exactly the pending approvals.
func checkAnswers(answers []resumeAnswer, pending []kernel.Approval) error {
	if len(pending) == 0 {
		return errdefs.Invalid("resume", "this thread has no pending interrupt")
	}
	open := make(map[string]bool, len(pending))
	for _, a := range pending {
		open[a.ToolCallID] = true
	}
	for _, a := range answers {
		if !open[a.interruptID] {
			return errdefs.New(errdefs.ErrConflict, "interrupt_not_pending",
				"resume: %q is not a pending interrupt of this thread (answered already, or never asked)", a.interruptID)
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
