package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/telemetry"
	"github.com/kerneld/kerneld/internal/telemetry/otlptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env returns a getenv reading vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestNew_OffWithoutEndpoint(t *testing.T) {
	rcv := otlptest.NewHTTP(t) // listening, but nobody is told where
	tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: env(map[string]string{
		"OTEL_SERVICE_NAME": "kerneld-test", telemetry.ContentEnv: "true",
	})})
	require.NoError(t, err)
	assert.False(t, tr.Enabled())
	assert.False(t, tr.RecordContent(), "content is never recorded when nothing is exported")
	_, span := tr.Tracer().Start(t.Context(), "run")
	assert.False(t, span.IsRecording(), "a span without an endpoint records nothing")
	assert.False(t, span.SpanContext().IsValid(), "and gets no ids")
	span.End()
	require.NoError(t, tr.Shutdown(t.Context()))
	assert.Zero(t, rcv.Requests())
}

func TestNew_Disabled(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"sdk disabled":  {"OTEL_SDK_DISABLED": "true"},
		"exporter none": {"OTEL_TRACES_EXPORTER": "none"},
	} {
		t.Run(name, func(t *testing.T) {
			rcv := otlptest.NewHTTP(t)
			vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.Endpoint
			tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: env(vars)})
			require.NoError(t, err)
			assert.False(t, tr.Enabled())
			_, span := tr.Tracer().Start(t.Context(), "run")
			span.End()
			require.NoError(t, tr.Shutdown(t.Context()))
			assert.Zero(t, rcv.Requests())
		})
	}
}

func TestNew_Exports(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			rcv := otlptest.NewHTTP(t)
			if proto == "grpc" {
				rcv = otlptest.NewGRPC(t)
			}
			tr, err := telemetry.New(t.Context(), telemetry.Options{ServiceVersion: "v1.2.3", Getenv: env(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": proto,
			})})
			require.NoError(t, err)
			require.True(t, tr.Enabled())
			ctx, parent := tr.Tracer().Start(t.Context(), "run")
			_, child := tr.Tracer().Start(ctx, "chat")
			child.SetAttributes(attribute.String("gen_ai.request.model", "m"))
			child.End()
			parent.End()
			require.NoError(t, tr.Shutdown(t.Context())) // flushes

			spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) == 2 })
			chat, run := otlptest.Find(spans, "chat")[0], otlptest.Find(spans, "run")[0]
			assert.Equal(t, run.TraceID, chat.TraceID)
			assert.Equal(t, run.SpanID, chat.ParentSpanID)
			assert.Equal(t, "m", chat.Attrs["gen_ai.request.model"])
			assert.Equal(t, "kerneld", chat.Resource["service.name"])
			assert.Equal(t, "v1.2.3", chat.Resource["service.version"])
			assert.Equal(t, telemetry.ScopeName, chat.Scope)
		})
	}
}

func TestNew_ServiceNameFromEnv(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "kerneld-eu") // the SDK's resource detector reads the process environment
	rcv := otlptest.NewHTTP(t)
	tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.Endpoint + "/v1/traces",
	})})
	require.NoError(t, err)
	_, span := tr.Tracer().Start(t.Context(), "run")
	span.End()
	require.NoError(t, tr.Shutdown(t.Context()))
	spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) == 1 })
	assert.Equal(t, "kerneld-eu", spans[0].Resource["service.name"])
}

func TestNew_RecordContent(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	for _, tt := range []struct {
		name   string
		opt    bool
		envVal string
		want   bool
	}{
		{"off by default", false, "", false},
		{"config opts in", true, "", true},
		{"variable opts in", false, "true", true},
		{"variable false", false, "false", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := telemetry.New(t.Context(), telemetry.Options{RecordContent: tt.opt, Getenv: env(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, telemetry.ContentEnv: tt.envVal,
			})})
			require.NoError(t, err)
			assert.Equal(t, tt.want, tr.RecordContent())
			require.NoError(t, tr.Shutdown(t.Context()))
		})
	}
}

func TestNew_RefusesWhatItCannotHonour(t *testing.T) {
	for _, tt := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"http/json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{"not a URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"not http", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://collector/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: env(tt.vars)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.False(t, tr.Enabled())
		})
	}
}

func TestLogHandler(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})})
	require.NoError(t, err)
	defer func() { require.NoError(t, tr.Shutdown(context.Background())) }()

	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("system", "kernel")
	ctx, span := tr.Tracer().Start(t.Context(), "run")
	log.InfoContext(ctx, "in a span")
	span.End()
	log.InfoContext(t.Context(), "outside")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var in, out map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &in))
	require.NoError(t, json.Unmarshal(lines[1], &out))
	assert.Equal(t, span.SpanContext().TraceID().String(), in["trace_id"])
	assert.Equal(t, span.SpanContext().SpanID().String(), in["span_id"])
	assert.Equal(t, "kernel", in["system"])
	assert.NotContains(t, out, "trace_id")
}
