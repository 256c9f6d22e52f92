// Package telemetry sets up kerneld's OpenTelemetry tracing from the
// standard OTEL_* environment variables: a tracer provider exporting OTLP
// (HTTP/protobuf or gRPC) when an endpoint is set, and a no-op one, which
// records nothing and costs nothing, when none is. It also owns the W3C
// trace-context propagator and the slog handler that stamps log lines with
// trace and span ids.
//
// It starts no spans of its own: spans are started where the work happens
// (httpapi's middleware, the kernel's runs) through the OTel API, with the
// tracer this package hands out.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span kerneld starts.
const ScopeName = "github.com/kerneld/kerneld"

// ContentEnv is the variable that opts in to recording message content
// (prompts, answers, tool arguments and results) on spans: the name the
// OpenTelemetry GenAI instrumentations of other languages read.
const ContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// Options configure tracing.
type Options struct {
	// Getenv reads the OTEL_* variables; the daemon passes os.Getenv.
	// The exporter reads its finer settings (OTEL_EXPORTER_OTLP_HEADERS,
	// _TIMEOUT, _COMPRESSION, _CERTIFICATE), the batch processor its
	// OTEL_BSP_* and the SDK its OTEL_TRACES_SAMPLER* from the process
	// environment itself.
	Getenv func(string) string
	// ServiceVersion is service.version on every span's resource.
	ServiceVersion string
	// RecordContent records message content on spans; ContentEnv set to
	// true opts in as well.
	RecordContent bool
}

// Tracing is kerneld's tracer provider: an exporting one when an OTLP
// endpoint is configured, a no-op one otherwise.
type Tracing struct {
	provider      trace.TracerProvider
	sdk           *sdktrace.TracerProvider // nil when tracing is off
	tracer        trace.Tracer
	recordContent bool
	exporter      exporterConfig
}

// Disabled returns tracing that is off: every span is a no-op.
func Disabled() *Tracing {
	p := noop.NewTracerProvider()
	return &Tracing{provider: p, tracer: p.Tracer(ScopeName)}
}

// New returns tracing configured by the OTEL_* variables: off (see
// Disabled) unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and off whatever is set when
// OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none. Nothing is
// dialled here: the exporter connects when it first sends.
func New(ctx context.Context, opts Options) (*Tracing, error) {
	cfg, err := readExporterConfig(opts.Getenv)
	if err != nil || !cfg.enabled() {
		return Disabled(), err
	}
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return Disabled(), err
	}
	res, err := newResource(ctx, opts.ServiceVersion)
	if err != nil {
		return Disabled(), errors.Join(err, exp.Shutdown(ctx))
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	content := opts.RecordContent || strings.EqualFold(opts.Getenv(ContentEnv), "true")
	return &Tracing{provider: sdk, sdk: sdk, tracer: sdk.Tracer(ScopeName), recordContent: content, exporter: cfg}, nil
}

// newExporter returns the OTLP exporter of cfg's protocol, sending to its
// endpoint.
func newExporter(ctx context.Context, cfg exporterConfig) (*otlptrace.Exporter, error) {
	var exp *otlptrace.Exporter
	var err error
	switch cfg.protocol {
	case protocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.endpoint))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("create the OTLP trace exporter: %w", err)
	}
	return exp, nil
}

// newResource describes this process: service.name kerneld unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "kerneld"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil {
		return nil, fmt.Errorf("describe the traced process: %w", err)
	}
	return res, nil
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// RecordContent reports whether spans may carry message content.
func (t *Tracing) RecordContent() bool { return t.recordContent }

// Tracer returns the tracer kerneld starts its spans with.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// TracerProvider returns the provider behind Tracer.
func (t *Tracing) TracerProvider() trace.TracerProvider { return t.provider }

// Propagator reads and writes W3C traceparent, tracestate and baggage.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return propagator }

var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Describe returns what the startup log says of tracing.
func (t *Tracing) Describe() []any {
	if !t.Enabled() {
		return []any{"tracing", "off"}
	}
	return []any{"tracing", "otlp", "protocol", string(t.exporter.protocol), "endpoint", t.exporter.endpoint,
		"record_content", t.recordContent}
}

// Shutdown exports the spans still buffered and stops the exporter. It is
// the last thing kerneld does, so that the spans of runs ended by the
// shutdown are sent too.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
