package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/telemetry"
	"github.com/kerneld/kerneld/internal/telemetry/otlptest"
)

// callerTrace is the trace a test's client puts its requests in.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParent = "00-" + callerTrace + "-00f067aa0ba902b7-01"
)

// postTraced POSTs body to url under the caller's traceparent and returns
// the decoded answer.
func postTraced(t *testing.T, url, body string) map[string]any {
	t.Helper()
	status, m := request(t, http.MethodPost, url, body, "traceparent", callerParent)
	if status >= 300 {
		t.Fatalf("POST %s = %d %v", url, status, m)
	}
	return m
}

// approveAndFinish runs the gated agent through its approval: it returns
// the session and run ids once the run succeeded.
func approveAndFinish(t *testing.T, base string) (string, string) {
	t.Helper()
	id := postTraced(t, base+"/sessions", `{"agent":"gated"}`)["id"].(string)
	runID := postTraced(t, base+"/sessions/"+id+"/run", `{"input":"buy milk"}`)["id"].(string)
	waitRun(t, base, id, runID, "waiting_input")
	asked := customEvent(t, sessionEvents(t, base, id), "kerneld.approval.requested")
	post(t, base+"/sessions/"+id+"/runs/"+runID+"/approvals/"+asked["toolCallId"].(string), `{"decision":"approve"}`)
	waitRun(t, base, id, runID, "succeeded")
	return id, runID
}

// spansNamed returns the spans whose name starts with prefix.
func spansNamed(spans []otlptest.Span, prefix string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// TestRun_TracesARun traces a run with a tool call behind an approval: the
// run, its two model calls, the approval wait and the tool call are spans
// of the trace of the request that started the run, with the GenAI
// attributes, and without message content.
func TestRun_TracesARun(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	d := startInProcess(t, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint}))
	id, runID := approveAndFinish(t, d.base)
	if err := d.stop(); err != nil { // flushes the spans
		t.Fatalf("run: %v", err)
	}
	spans := rcv.Spans()

	runs := otlptest.Find(spans, "invoke_agent gated")
	if len(runs) != 1 {
		t.Fatalf("run spans = %d, want 1; spans: %v", len(runs), otlptest.Names(spans))
	}
	run := runs[0]
	if run.TraceID != callerTrace || run.Attrs["gen_ai.operation.name"] != "invoke_agent" ||
		run.Attrs["gen_ai.conversation.id"] != id || run.Attrs["kerneld.run.id"] != runID || run.Attrs["kerneld.run.state"] != "succeeded" {
		t.Errorf("run span = %+v", run)
	}
	post := otlptest.Find(spans, "POST /sessions/{id}/run")
	if len(post) != 1 || run.ParentSpanID != post[0].SpanID {
		t.Errorf("the run span's parent is %s, want the span of POST /sessions/{id}/run (%v)", run.ParentSpanID, post)
	}
	chats := spansNamed(spans, "chat")
	if len(chats) != 2 {
		t.Fatalf("model call spans = %d, want 2", len(chats))
	}
	first := chats[0]
	if first.Attrs["gen_ai.operation.name"] != "chat" || first.Attrs["gen_ai.provider.name"] != "scripted" ||
		first.ParentSpanID != run.SpanID || first.TraceID != callerTrace {
		t.Errorf("chat span = %+v", first)
	}
	if _, ok := first.Attrs["gen_ai.usage.input_tokens"].(int64); !ok {
		t.Errorf("chat span has no input tokens: %v", first.Attrs)
	}
	if _, ok := first.Attrs["gen_ai.usage.output_tokens"].(int64); !ok {
		t.Errorf("chat span has no output tokens: %v", first.Attrs)
	}
	reasons := map[any]bool{}
	for _, c := range chats {
		r, _ := c.Attrs["gen_ai.response.finish_reasons"].([]any)
		for _, x := range r {
			reasons[x] = true
		}
	}
	if !reasons["tool_calls"] || !reasons["stop"] {
		t.Errorf("finish reasons = %v, want tool_calls then stop", reasons)
	}
	tools := otlptest.Find(spans, "execute_tool memory_set")
	if len(tools) != 1 || tools[0].Attrs["gen_ai.tool.name"] != "memory_set" || tools[0].Attrs["gen_ai.tool.call.id"] == "" ||
		tools[0].ParentSpanID != run.SpanID {
		t.Errorf("tool span = %+v", tools)
	}
	waits := otlptest.Find(spans, telemetry.ApprovalWaitSpanName)
	if len(waits) != 1 || waits[0].Attrs["kerneld.approval.decision"] != "approve" || waits[0].ParentSpanID != run.SpanID {
		t.Errorf("approval wait span = %+v", waits)
	}
	for _, s := range spans {
		for _, key := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
			if _, ok := s.Attrs[key]; ok {
				t.Errorf("span %s records %s, but content was not opted in", s.Name, key)
			}
		}
	}
	if !strings.Contains(d.logs.String(), "trace_id="+callerTrace) {
		t.Errorf("no log line carries the run's trace id")
	}
}

// TestRun_TracesContentWhenOptedIn records prompts, answers and tool
// arguments on the spans only when the operator opts in.
func TestRun_TracesContentWhenOptedIn(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	d := startInProcess(t, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, telemetry.ContentEnv: "true"}))
	approveAndFinish(t, d.base)
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	spans := rcv.Spans()
	chat := spansNamed(spans, "chat")[0]
	if in, _ := chat.Attrs["gen_ai.input.messages"].(string); !strings.Contains(in, "buy milk") {
		t.Errorf("chat span input messages = %q, want the prompt", in)
	}
	if out, _ := chat.Attrs["gen_ai.output.messages"].(string); !strings.Contains(out, "Saving your note.") {
		t.Errorf("chat span output messages = %q, want the answer", out)
	}
	tool := otlptest.Find(spans, "execute_tool memory_set")[0]
	if args, _ := tool.Attrs["gen_ai.tool.call.arguments"].(string); !strings.Contains(args, "buy milk") {
		t.Errorf("tool span arguments = %q", args)
	}
}

// TestRun_NoTracesWithoutEndpoint exports nothing when no OTLP endpoint is
// set, though a receiver listens and requests carry a traceparent.
func TestRun_NoTracesWithoutEndpoint(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	d := startInProcess(t, env(map[string]string{telemetry.ContentEnv: "true"}))
	approveAndFinish(t, d.base)
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := rcv.Requests(); n != 0 {
		t.Errorf("the receiver got %d export requests, want none", n)
	}
	if !strings.Contains(d.logs.String(), "tracing=off") {
		t.Errorf("the startup line does not say tracing is off")
	}
}

// TestCluster_TraceAcrossTakeOver starts a run behind an approval on
// replica A under the caller's trace, kills A with SIGKILL, and has B take
// the run over: the spans B makes of the run (its continued run span, the
// approval wait, the tool call, the model call) are in the caller's trace.
func TestCluster_TraceAcrossTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	srv := redistest.Use(t)
	rcv := otlptest.NewHTTP(t)
	c := newCluster(t, redisStore(srv.URL, srv.Prefix))
	c.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint}
	a, b := c.start("a"), c.start("b")

	id := postTraced(t, a.base+"/sessions", `{"agent":"asking"}`)["id"].(string)
	runID := postTraced(t, a.base+"/sessions/"+id+"/run", `{"input":"what time is it?"}`)["id"].(string)
	waitRun(t, a.base, id, runID, "waiting_input")
	a.kill9(t)
	asked := customEvent(t, sessionEvents(t, b.base, id), "kerneld.approval.requested")
	post(t, b.base+"/sessions/"+id+"/runs/"+runID+"/approvals/"+asked["toolCallId"].(string), `{"decision":"approve"}`)
	waitRun(t, b.base, id, runID, "succeeded")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM)) // flushes B's spans
	<-b.done()

	spans := rcv.Spans()
	var continued []otlptest.Span
	for _, s := range otlptest.Find(spans, "invoke_agent asking") {
		if s.Attrs["kerneld.run.resumes"] != int64(0) {
			continued = append(continued, s)
		}
	}
	require.Len(t, continued, 1, "B's span of the run it continued; spans: %v", otlptest.Names(spans))
	run := continued[0]
	assert.Equal(t, callerTrace, run.TraceID, "the continued run is in the caller's trace")
	assert.Equal(t, runID, run.Attrs["kerneld.run.id"])
	for _, name := range []string{"execute_tool current_time", telemetry.ApprovalWaitSpanName} {
		got := otlptest.Find(spans, name)
		if assert.NotEmpty(t, got, name) {
			last := got[len(got)-1]
			assert.Equal(t, callerTrace, last.TraceID, name)
			assert.Equal(t, run.SpanID, last.ParentSpanID, name)
		}
	}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat") || strings.HasPrefix(s.Name, "invoke_agent") {
			assert.Equal(t, callerTrace, s.TraceID, s.Name)
		}
	}
}
