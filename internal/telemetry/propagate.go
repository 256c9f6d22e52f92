package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// TraceParent returns the W3C traceparent of ctx's span, or "" when ctx
// holds none. A run keeps the traceparent of the request that started it,
// so that whoever continues the run (after a crash, a take-over or a
// shutdown) puts its spans in the same trace.
func TraceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// WithTraceParent returns ctx with the span traceparent names as the
// remote parent of the spans started under it; a malformed or empty one
// leaves ctx as it is.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
