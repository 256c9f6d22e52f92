package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// Clients older than AG-UI 1.0.
//
// @ag-ui/client 0.0.x, the generation CopilotKit pins (0.0.59 in
// CopilotKit 1.74 and runtime 1.75), validates every event with its own
// schemas before it applies it, and a RUN_FINISHED it cannot parse ends
// the run in an error. Two outcomes kerneld logs are 1.0's and fail
// there: `{"type":"success","pendingToolCallIds":[…]}` (0.0.x takes
// `{"type":"success"}` and nothing more) and `{"type":"cancelled"}` (0.0.x
// knows success and interrupt only). A 1.0 client declares itself with
// RunAgentInput.protocolVersion; a 0.0.x client sends none. So a run
// asked for without a protocolVersion of 1.0 or later ends in the terms
// both generations accept: the pending client tool calls are left out
// (a client knows them: it received their TOOL_CALL_END and holds their
// handlers), and a cancelled run ends with RUN_ERROR code "cancelled",
// as AG-UI had it before 1.0. Only this route's frames change: the log
// keeps the 1.0 forms.

// legacyClient reports whether a RunAgentInput's protocolVersion says the
// client predates AG-UI 1.0: absent, or a major version of 0, or a
// version it cannot read.
func legacyClient(version *string) bool {
	if version == nil {
		return true
	}
	major, _, _ := strings.Cut(*version, ".")
	n, err := strconv.Atoi(major)
	return err != nil || n < 1
}

// pendingMember is where a success outcome names the client's tool calls.
var pendingMember = []byte(`,"pendingToolCallIds":[`)

// cancelledOutcome is the outcome of a cancelled run.
var cancelledOutcome = []byte(`"outcome":{"type":"cancelled"}`)

// legacyRunEnd returns a RUN_FINISHED frame as a client before AG-UI 1.0
// takes it: without pendingToolCallIds, and a cancelled run's as a
// RUN_ERROR. Any other frame comes back as it is.
func legacyRunEnd(frame []byte) []byte {
	if i := bytes.Index(frame, pendingMember); i >= 0 {
		if j := bytes.IndexByte(frame[i+len(pendingMember):], ']'); j >= 0 {
			end := i + len(pendingMember) + j + 1
			return append(append(make([]byte, 0, len(frame)), frame[:i]...), frame[end:]...)
		}
	}
	if bytes.Contains(frame, cancelledOutcome) {
		return cancelledAsError(frame)
	}
	return frame
}

// cancelledAsError turns the RUN_FINISHED frame of a cancelled run into
// a RUN_ERROR frame with the same id, usage, time and metadata (whose
// kerneld.reason says who cancelled it).
func cancelledAsError(frame []byte) []byte {
	head, data, ok := bytes.Cut(frame, []byte("\ndata: "))
	id, _, _ := bytes.Cut(head, []byte("\n"))
	var ev map[string]json.RawMessage
	if !ok || json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return frame
	}
	for _, k := range []string{"threadId", "runId", "outcome"} {
		delete(ev, k)
	}
	ev["type"] = json.RawMessage(`"` + session.EventRunError + `"`)
	ev["code"] = json.RawMessage(`"cancelled"`)
	ev["message"] = json.RawMessage(`"the run was cancelled"`)
	out, err := json.Marshal(ev)
	if err != nil {
		return frame
	}
	b := append(append([]byte(nil), id...), "\nevent: "+session.EventRunError+"\ndata: "...)
	return append(append(b, out...), "\n\n"...)
}
