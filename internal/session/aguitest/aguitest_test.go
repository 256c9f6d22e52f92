package aguitest_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

const sessionID = "s_1"

var t0 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// stamp sets the envelope of each run's events as the log would: session
// id, run id (taken from the run's RUN_STARTED), time and seq from 1 on.
func stamp(runs ...[]session.Event) []session.Event {
	var out []session.Event
	for _, run := range runs {
		runID := run[0].Member("runId")
		for _, ev := range run {
			ev.SessionID, ev.RunID = sessionID, runID
			ev.Seq = int64(len(out) + 1)
			ev.Time = t0.Add(time.Duration(ev.Seq) * time.Millisecond)
			out = append(out, ev)
		}
	}
	return out
}

// userEcho is the user's input echoed at the start of run runID.
func userEcho(runID, text string) []session.Event {
	id := runID + "-user"
	return []session.Event{
		session.TextMessageStart(id, session.RoleUser),
		session.TextMessageContent(id, text),
		session.TextMessageEnd(id),
	}
}

// successRun is a run that reasons, calls a tool and answers.
func successRun(runID string) []session.Event {
	evs := []session.Event{session.RunStarted(sessionID, runID)}
	evs = append(evs, userEcho(runID, "What is 6×7? Answer \"briefly\".\n")...)
	a1, a2, r, tc := runID+"-a1", runID+"-a2", runID+"-r1", runID+"-t1"
	return append(evs,
		session.StepStarted("llm#1"),
		session.ReasoningStart(r),
		session.ReasoningMessageStart(r),
		session.ReasoningMessageContent(r, "Use the calculator."),
		session.ReasoningMessageEnd(r),
		session.ReasoningEnd(r),
		session.TextMessageStart(a1, session.RoleAssistant),
		session.TextMessageContent(a1, "Let me "),
		session.TextMessageContent(a1, "check."),
		session.TextMessageEnd(a1),
		session.ToolCallStart(tc, "calc", a1),
		session.ToolCallArgs(tc, `{"expr":`),
		session.ToolCallArgs(tc, `"6*7"}`),
		session.ToolCallEnd(tc),
		session.StepFinished("llm#1"),
		session.Custom("kerneld.approval.resolved", map[string]any{"toolCallId": tc, "approved": true}),
		session.ToolCallResult(tc+"-result", tc, "42", false),
		session.StepStarted("llm#2"),
		session.TextMessageStart(a2, session.RoleAssistant),
		session.TextMessageContent(a2, "6×7 = 42."),
		session.TextMessageEnd(a2),
		session.StepFinished("llm#2"),
		session.RunFinished(sessionID, runID, session.OutcomeSuccess, "", session.Usage{InputTokens: 120, OutputTokens: 30}),
	)
}

// cancelledRun is a run cancelled mid-answer, closed the way the kernel
// closes it: the missing ends, a synthetic result, then RUN_FINISHED.
func cancelledRun(runID string) []session.Event {
	evs := []session.Event{session.RunStarted(sessionID, runID)}
	evs = append(evs, userEcho(runID, "Search for it")...)
	a, tc := runID+"-a1", runID+"-t1"
	return append(evs,
		session.TextMessageStart(a, session.RoleAssistant),
		session.TextMessageContent(a, "Search"),
		session.ToolCallStart(tc, "search", a),
		session.ToolCallArgs(tc, `{"q":`),
		session.TextMessageEnd(a),
		session.ToolCallEnd(tc),
		session.ToolCallResult(tc+"-result", tc, "cancelled", true),
		session.RunFinished(sessionID, runID, session.OutcomeCancelled, session.ReasonCancelled, session.Usage{InputTokens: 40, OutputTokens: 3}),
	)
}

// failedRun is a run whose model call failed.
func failedRun(runID string) []session.Event {
	evs := []session.Event{session.RunStarted(sessionID, runID)}
	evs = append(evs, userEcho(runID, "Hello")...)
	return append(evs,
		session.StepStarted("llm#1"),
		session.StepFinished("llm#1"),
		session.RunErrored(session.ErrorCodeModel, "model: upstream answered 500", session.Usage{InputTokens: 10}),
	)
}

func TestVerifySuccessfulRun(t *testing.T) {
	aguitest.Verify(t, stamp(successRun("r1")))
}

func TestVerifyCancelledRun(t *testing.T) {
	aguitest.Verify(t, stamp(cancelledRun("r1")))
}

func TestVerifyFailedRun(t *testing.T) {
	aguitest.Verify(t, stamp(failedRun("r1")))
}

func TestVerifyConsecutiveRuns(t *testing.T) {
	events := stamp(successRun("r1"), failedRun("r2"), cancelledRun("r3"), successRun("r4"))
	aguitest.Verify(t, events)

	// Read from any run boundary, the log is a valid stream too.
	start := slices.IndexFunc(events, func(ev session.Event) bool { return ev.RunID == "r3" })
	aguitest.VerifyJSON(t, wire(events[start:]))
}

func TestCheckRejects(t *testing.T) {
	tests := []struct {
		name    string
		objects [][]byte
		want    []string
	}{
		{
			name:    "run left open",
			objects: wire(stamp(without(successRun("r1"), session.EventRunFinished, ""))),
			want:    []string{"ends with run r1 open"},
		},
		{
			name:    "finished with a text message open",
			objects: wire(stamp(without(successRun("r1"), session.EventTextMessageEnd, "r1-a2"))),
			want: []string{
				"run r1 closes while text message r1-a2 is still open",
				"Cannot send 'RUN_FINISHED' while text messages are still active: r1-a2",
			},
		},
		{
			name:    "empty delta",
			objects: wire(stamp(slices.Insert(successRun("r1"), 23, session.TextMessageContent("r1-a2", "")))),
			want:    []string{"event 23 (TEXT_MESSAGE_CONTENT): empty delta"},
		},
		{
			name:    "seq gap",
			objects: slices.Delete(wire(stamp(successRun("r1"))), 12, 13),
			want:    []string{"seq 14 follows seq 12, want 13"},
		},
		{
			name:    "tool call without a result",
			objects: wire(stamp(without(successRun("r1"), session.EventToolCallResult, "r1-t1-result"))),
			want:    []string{"run r1 closes while tool call r1-t1 has no TOOL_CALL_RESULT"},
		},
		{
			name: "unknown event type",
			objects: wire(stamp(slices.Insert(successRun("r1"), 3, session.Event{
				Type: "TEXT_MESSAGE_DELTA",
				Data: json.RawMessage(`{"type":"TEXT_MESSAGE_DELTA","messageId":"r1-user","delta":"!"}`),
			}))),
			want: []string{"event 3 (TEXT_MESSAGE_DELTA): schema: type: Invalid input"},
		},
		{
			name: "failed with a tool call open",
			objects: wire(stamp(slices.Insert(failedRun("r1"), 5,
				session.ToolCallStart("r1-t1", "calc", ""), session.ToolCallArgs("r1-t1", "{}")))),
			want: []string{"run r1 closes while tool call r1-t1 is still open"},
		},
		{
			name:    "event between runs",
			objects: wire(stamp(append(successRun("r1"), session.Custom("kerneld.run.queued", map[string]int{"position": 1})))),
			want:    []string{"event 27 (CUSTOM): outside a run"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := aguitest.Check(tt.objects)
			if errors.Is(err, aguitest.ErrUnavailable) {
				if os.Getenv("KERNELD_REQUIRE_AGUI") == "1" {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			if !errors.Is(err, aguitest.ErrRejected) {
				t.Fatalf("Check: err = %v, want ErrRejected; output:\n%s", err, out)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("output does not contain %q:\n%s", want, out)
				}
			}
		})
	}
}

// wire returns the events' wire objects.
func wire(events []session.Event) [][]byte {
	objects := make([][]byte, len(events))
	for i := range events {
		objects[i], _ = events[i].MarshalJSON()
	}
	return objects
}

// without returns evs less the first event of type typ whose messageId or
// toolCallId is id (any, if id is empty). It panics if there is none, which
// is a broken test.
func without(evs []session.Event, typ session.EventType, id string) []session.Event {
	i := slices.IndexFunc(evs, func(ev session.Event) bool {
		return ev.Type == typ && (id == "" || ev.Member("messageId") == id || ev.Member("toolCallId") == id)
	})
	if i < 0 {
		panic("no " + string(typ) + " " + id)
	}
	return slices.Delete(slices.Clone(evs), i, i+1)
}

// TestCheckLogs: several logs are checked in one run, and one bad log
// among good ones is still rejected, by name.
func TestCheckLogs(t *testing.T) {
	good := wire(stamp(successRun("r1")))
	bad := wire(without(stamp(successRun("r2")), session.EventRunFinished, ""))
	if _, err := aguitest.CheckLogs([][][]byte{good, good}); errors.Is(err, aguitest.ErrUnavailable) {
		t.Skip(err)
	} else if err != nil {
		t.Fatalf("two good logs: %v", err)
	}
	out, err := aguitest.CheckLogs([][][]byte{good, bad, good})
	if !errors.Is(err, aguitest.ErrRejected) || !strings.Contains(out, "log1.json") {
		t.Fatalf("a bad log among good ones: err %v, output %q", err, out)
	}
}
