package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// aguiView is how the AG-UI route presents a kerneld run. The log keeps
// one AG-UI run per kerneld run, approvals inside it as CUSTOM events; an
// AG-UI client instead expects a run that waits for approval to finish
// with an interrupt outcome, and the answer to start a run of its own. So
// the route ends its stream at an approval request with a RUN_FINISHED
// the log does not hold, and a resumed stream starts with a RUN_STARTED
// the log does not hold, under the client's new runId, which the run's
// real end then carries too.
type aguiView struct {
	preface []byte // frames sent first: a continuation's RUN_STARTED
	// from and to rename the run in its end event: `"runId":"<kerneld's>"`
	// to `"runId":"<the client's>"`. Nil keeps the name.
	from, to []byte
	// interrupt returns the frame that ends the stream at the approval
	// request with seq seq, or nil when nothing is pending any more.
	interrupt func(ctx context.Context, seq int64) []byte
	// legacy presents the run's end in the terms of AG-UI before 1.0 (see
	// legacyRunEnd).
	legacy bool
}

// approvalRequestedName marks the CUSTOM frame of an approval request.
var approvalRequestedName = []byte(`"name":"kerneld.approval.requested"`)

// present returns the frame of an event as the client is to see it.
func (v *aguiView) present(typ session.EventType, frame []byte) []byte {
	if v == nil || !typ.Ends() {
		return frame
	}
	if v.from != nil {
		frame = bytes.Replace(frame, v.from, v.to, 1)
	}
	if v.legacy && typ == session.EventRunFinished {
		frame = legacyRunEnd(frame)
	}
	return frame
}

// interrupts ends the stream at an approval request of its run, when the
// view says to: it appends the interrupt's RUN_FINISHED and reports true.
func (st *stream) interrupts(ctx context.Context, seq int64, typ session.EventType, frame []byte) bool {
	v := st.req.aguiView
	if v == nil || v.interrupt == nil || typ != session.EventCustom || !bytes.Contains(frame, approvalRequestedName) {
		return false
	}
	end := v.interrupt(ctx, seq)
	if end == nil {
		return false
	}
	st.buf = append(st.buf, end...)
	return true
}

// newAGUIView returns the view of run for a client that calls it
// clientRunID: the run's own id on its first request, the resuming
// request's runId on a continuation.
func (s *Server) newAGUIView(run session.Run, clientRunID string, legacy bool) *aguiView {
	v := &aguiView{legacy: legacy}
	if clientRunID != run.ID {
		v.from = []byte(`"runId":` + strconv.Quote(run.ID))
		v.to = []byte(`"runId":` + strconv.Quote(clientRunID))
	}
	v.interrupt = func(ctx context.Context, seq int64) []byte {
		pending, err := s.pendingApprovals(ctx, run)
		if err != nil || len(pending) == 0 {
			return nil // decided meanwhile (or unreadable): the run goes on
		}
		return interruptFrame(run, clientRunID, seq, pending)
	}
	return v
}

// pendingApprovals returns the approvals run waits for, in order: those
// requested and not decided, neither in the log nor on the run.
func (s *Server) pendingApprovals(ctx context.Context, run session.Run) ([]kernel.Approval, error) {
	all, err := s.kernel.Approvals(ctx, run.SessionID, run.ID)
	if err != nil {
		return nil, err
	}
	now, err := s.kernel.GetRun(ctx, run.SessionID, run.ID)
	if err != nil {
		return nil, err
	}
	var out []kernel.Approval
	for _, a := range all {
		if _, decided := now.Decided(a.ToolCallID); a.State == kernel.ApprovalPending && !decided {
			out = append(out, a)
		}
	}
	return out, nil
}

// approvalResponseSchema is the answer an approval interrupt expects.
var approvalResponseSchema = map[string]any{
	"type":     "object",
	"required": []string{"decision"},
	"properties": map[string]any{
		"decision": map[string]any{"type": "string", "enum": []string{kernel.DecisionApprove, kernel.DecisionDeny}},
		"reason":   map[string]any{"type": "string"},
	},
	"additionalProperties": false,
}

// interruptFrame is the RUN_FINISHED that presents run, waiting for the
// pending approvals, as an AG-UI run that ended on interrupts, after the
// request with seq seq.
func interruptFrame(run session.Run, clientRunID string, seq int64, pending []kernel.Approval) []byte {
	interrupts := make([]map[string]any, len(pending))
	for i, a := range pending {
		interrupts[i] = map[string]any{
			"id": a.ToolCallID, "reason": "tool_approval", "toolCallId": a.ToolCallID,
			"message":        fmt.Sprintf("Allow the call of tool %s with arguments %s?", a.ToolName, a.Arguments),
			"responseSchema": approvalResponseSchema,
			"expiresAt":      a.ExpiresAt.UTC().Format(time.RFC3339Nano),
		}
	}
	return syntheticFrame(run, session.EventRunFinished, seq, map[string]any{
		"threadId": session.PublicID(run.SessionID), "runId": clientRunID,
		"outcome": map[string]any{"type": "interrupt", "interrupts": interrupts},
	})
}

// runStartedFrame is the RUN_STARTED of a continuation of run, under the
// client's runId, after the event with seq seq.
func runStartedFrame(run session.Run, clientRunID string, seq int64) []byte {
	return syntheticFrame(run, session.EventRunStarted, seq, map[string]any{
		"threadId": session.PublicID(run.SessionID), "runId": clientRunID, "protocolVersion": "1.0",
	})
}

// syntheticFrame encodes an event of run's that the route presents and
// the log does not hold. Like a MESSAGES_SNAPSHOT it takes the id of the
// event before it, seq, the id a client resumes after.
func syntheticFrame(run session.Run, typ session.EventType, seq int64, fields map[string]any) []byte {
	fields["type"] = typ
	data, _ := json.Marshal(fields) // strings and maps of them always encode
	ev := session.Event{SessionID: run.SessionID, RunID: run.ID, Seq: seq, Type: typ, Time: time.Now(), Data: data}
	return appendEventFrame(nil, &ev)
}
