package kernel

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/telemetry"
)

// Tracing a run. A run's spans hang under the span of the request that
// accepted it, whose W3C traceparent the run keeps (RunExt.TraceParent):
// whichever process executes the run, first or continuing it after a
// crash, a take-over or a shutdown, starts its run span there, so the
// whole run is one trace. Under the run span: a span per model call, per
// tool call, per approval wait, per guard call, and the wait in the
// session's queue. With tracing off every span is a no-op and the run
// keeps no traceparent.

// traceParent returns the traceparent a run accepted under ctx keeps;
// "" when tracing is off.
func (k *Kernel) traceParent(ctx context.Context) string {
	if !k.tracing.Enabled() {
		return ""
	}
	return telemetry.TraceParent(ctx)
}

// startRunSpan starts the span of this process's part of the run and
// returns ctx holding it. A run starting fresh is traced from when it was
// accepted, its time in the queue as a child span.
func (r *runner) startRunSpan(ctx context.Context) (context.Context, trace.Span) {
	if !r.k.tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	run := r.run
	start := r.k.now()
	fresh := r.ar.started != nil
	if fresh {
		start = run.CreatedAt
	}
	attrs := telemetry.RunAttrs(r.spec.Name, session.PublicID(run.SessionID), run.ID, r.ar.tenant)
	attrs = append(attrs, attribute.Int("kerneld.run.resumes", run.Resumes))
	ctx, span := r.k.tracing.Tracer().Start(telemetry.WithTraceParent(ctx, run.TraceParent), telemetry.RunSpanName(r.spec.Name),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if fresh && run.StartedAt.After(run.CreatedAt) {
		_, wait := r.k.tracing.Tracer().Start(ctx, telemetry.QueueWaitSpanName, trace.WithTimestamp(run.CreatedAt))
		wait.End(trace.WithTimestamp(run.StartedAt))
	}
	if content := r.k.tracing.Content(telemetry.InputMessagesKey, run.Input); fresh && len(content) > 0 {
		span.SetAttributes(content...)
	}
	sc := span.SpanContext()
	r.log = r.log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	return ctx, span
}

// endRunSpan ends the run span with the run's usage and how it went.
func (r *runner) endRunSpan(span trace.Span) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.UsageAttrs(r.usage.InputTokens, r.usage.OutputTokens)...)
	span.SetAttributes(attribute.String("kerneld.run.state", string(r.run.State)))
	if e := r.run.Error; e != nil {
		span.SetAttributes(attribute.String("error.type", e.Code))
		span.SetStatus(codes.Error, e.Message)
	}
	span.End()
}

// startChatSpan starts the span of a model call.
func (r *runner) startChatSpan(ctx context.Context, req llm.Request) (context.Context, trace.Span) {
	if !r.k.tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	model := cmp.Or(req.Model, r.spec.Model.Name, r.spec.Model.Provider) // a scripted agent may name none
	ctx, span := r.k.tracing.Tracer().Start(ctx, telemetry.ChatSpanName(model), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(telemetry.ChatAttrs(r.spec.Model.Provider, model)...))
	if r.k.tracing.RecordContent() && span.IsRecording() {
		span.SetAttributes(r.k.tracing.Content(telemetry.InputMessagesKey, jsonText(req.Messages))...)
	}
	return ctx, span
}

// endChatSpan ends a model call's span with what it spent and produced;
// err is its failure, if it failed.
func (r *runner) endChatSpan(span trace.Span, t *turn, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	if t != nil {
		reason := "stop"
		if len(t.calls) > 0 {
			reason = "tool_calls"
		}
		span.SetAttributes(telemetry.UsageAttrs(t.usage.InputTokens, t.usage.OutputTokens, reason)...)
		if m, ok := t.message(); ok && r.k.tracing.RecordContent() {
			span.SetAttributes(r.k.tracing.Content(telemetry.OutputMessagesKey, jsonText(m))...)
		}
	}
	span.End()
}

// startToolSpan starts the span of tool call c.
func (r *runner) startToolSpan(ctx context.Context, c session.ToolCall) (context.Context, trace.Span) {
	ctx, span := r.k.tracing.Tracer().Start(ctx, telemetry.ToolSpanName(c.Name),
		trace.WithAttributes(telemetry.ToolAttrs(c.Name, c.ID)...))
	span.SetAttributes(r.k.tracing.Content(telemetry.ToolArgumentsKey, c.Arguments)...)
	return ctx, span
}

// endToolSpan ends a tool call's span with its result.
func (r *runner) endToolSpan(span trace.Span, res toolResult) {
	if res.isError {
		span.SetStatus(codes.Error, "the tool call returned an error")
	}
	span.SetAttributes(r.k.tracing.Content(telemetry.ToolResultKey, res.content)...)
	span.End()
}

// startWaitSpan starts the span of tool call c waiting for a person.
func (r *runner) startWaitSpan(ctx context.Context, c session.ToolCall) trace.Span {
	// The tool's name and call id, without gen_ai.operation.name: waiting
	// is no execute_tool.
	_, span := r.k.tracing.Tracer().Start(ctx, telemetry.ApprovalWaitSpanName,
		trace.WithAttributes(telemetry.ToolAttrs(c.Name, c.ID)[1:]...))
	return span
}

// endWaitSpan ends an approval wait with its outcome: approve, deny,
// expired, or left for another process.
func endWaitSpan(span trace.Span, outcome string) {
	span.SetAttributes(attribute.String("kerneld.approval.decision", outcome))
	span.End()
}

// traceGuard records a guard's call as a span that ends now.
func (r *runner) traceGuard(ctx context.Context, stage string, decision string, failed bool, took time.Duration) {
	if !r.k.tracing.Enabled() {
		return
	}
	end := r.k.now()
	_, span := r.k.tracing.Tracer().Start(ctx, telemetry.GuardSpanName, trace.WithTimestamp(end.Add(-took)),
		trace.WithAttributes(attribute.String("kerneld.guard.stage", stage), attribute.String("kerneld.guard.decision", decision),
			attribute.Bool("kerneld.guard.failed", failed)))
	if failed {
		span.SetStatus(codes.Error, "the guard did not answer properly")
	}
	span.End(trace.WithTimestamp(end))
}

// jsonText is v as JSON, for a span's content attributes.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
