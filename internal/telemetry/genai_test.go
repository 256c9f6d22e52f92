package telemetry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/telemetry"
	"github.com/kerneld/kerneld/internal/telemetry/otlptest"
)

// TestGenAIAttrs checks the names the receiver sees against the GenAI
// semantic conventions.
func TestGenAIAttrs(t *testing.T) {
	for _, content := range []bool{false, true} {
		rcv := otlptest.NewHTTP(t)
		tr, err := telemetry.New(t.Context(), telemetry.Options{RecordContent: content,
			Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})})
		require.NoError(t, err)
		ctx, run := tr.Tracer().Start(t.Context(), telemetry.RunSpanName("helper"))
		run.SetAttributes(telemetry.RunAttrs("helper", "s1", "r1", "acme")...)
		_, chat := tr.Tracer().Start(ctx, telemetry.ChatSpanName("gpt-4o-mini"))
		chat.SetAttributes(telemetry.ChatAttrs("openai", "gpt-4o-mini")...)
		chat.SetAttributes(telemetry.UsageAttrs(12, 3, "tool_calls")...)
		chat.SetAttributes(tr.Content(telemetry.OutputMessagesKey, `[{"role":"assistant"}]`)...)
		chat.End()
		_, tool := tr.Tracer().Start(ctx, telemetry.ToolSpanName("memory_set"))
		tool.SetAttributes(telemetry.ToolAttrs("memory_set", "call_1")...)
		tool.End()
		run.End()
		require.NoError(t, tr.Shutdown(t.Context()))

		spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) == 3 })
		c := otlptest.Find(spans, "chat gpt-4o-mini")[0]
		assert.Equal(t, "chat", c.Attrs["gen_ai.operation.name"])
		assert.Equal(t, "openai", c.Attrs["gen_ai.provider.name"])
		assert.Equal(t, "gpt-4o-mini", c.Attrs["gen_ai.request.model"])
		assert.Equal(t, int64(12), c.Attrs["gen_ai.usage.input_tokens"])
		assert.Equal(t, int64(3), c.Attrs["gen_ai.usage.output_tokens"])
		assert.Equal(t, []any{"tool_calls"}, c.Attrs["gen_ai.response.finish_reasons"])
		if content {
			assert.Equal(t, `[{"role":"assistant"}]`, c.Attrs["gen_ai.output.messages"])
		} else {
			assert.NotContains(t, c.Attrs, "gen_ai.output.messages", "no content unless opted in")
		}
		tl := otlptest.Find(spans, "execute_tool memory_set")[0]
		assert.Equal(t, "execute_tool", tl.Attrs["gen_ai.operation.name"])
		assert.Equal(t, "memory_set", tl.Attrs["gen_ai.tool.name"])
		assert.Equal(t, "call_1", tl.Attrs["gen_ai.tool.call.id"])
		r := otlptest.Find(spans, "invoke_agent helper")[0]
		assert.Equal(t, "invoke_agent", r.Attrs["gen_ai.operation.name"])
		assert.Equal(t, "s1", r.Attrs["gen_ai.conversation.id"])
		assert.Equal(t, r.SpanID, c.ParentSpanID)
	}
}

// TestTraceParent checks that a traceparent kept on a run puts a later
// process's spans in the same trace.
func TestTraceParent(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})})
	require.NoError(t, err)
	ctx, req := tr.Tracer().Start(t.Context(), "POST /sessions/{id}/run")
	kept := telemetry.TraceParent(ctx)
	req.End()
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, kept)
	assert.Empty(t, telemetry.TraceParent(t.Context()))

	_, cont := tr.Tracer().Start(telemetry.WithTraceParent(t.Context(), kept), "invoke_agent helper")
	cont.End()
	_, bad := tr.Tracer().Start(telemetry.WithTraceParent(t.Context(), "garbage"), "invoke_agent other")
	bad.End()
	require.NoError(t, tr.Shutdown(t.Context()))
	spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) == 3 })
	first, later := otlptest.Find(spans, "POST /sessions/{id}/run")[0], otlptest.Find(spans, "invoke_agent helper")[0]
	assert.Equal(t, first.TraceID, later.TraceID)
	assert.Equal(t, first.SpanID, later.ParentSpanID)
	assert.NotEqual(t, first.TraceID, otlptest.Find(spans, "invoke_agent other")[0].TraceID)
}
