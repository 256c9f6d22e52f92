// Package otlptest is an OTLP trace receiver that runs in the test's
// process: it accepts what an OpenTelemetry exporter sends over
// OTLP/HTTP (protobuf) or OTLP/gRPC, decodes it with the official OTLP
// protobuf types, and lets a test wait for the spans it expects. The load
// tool uses it as a receiver that accepts everything.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for assertions.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex; ParentSpanID "" for a root
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attrs                         map[string]any // string, int64, float64, bool or []any
	Resource                      map[string]any
	Scope                         string
	Status                        tracepb.Status_StatusCode
	StatusMessage                 string
	Links                         []Link
	Start, End                    time.Time
}

// Link is a span's link to another span.
type Link struct{ TraceID, SpanID string }

// Receiver collects the spans sent to it.
type Receiver struct {
	// Endpoint is the base URL to put in OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	// Protocol is the value for OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol string

	keep     bool // keep the spans, or only count them
	mu       sync.Mutex
	spans    []Span
	count    int
	requests int
	changed  chan struct{} // closed, and replaced, whenever spans arrive
	close    func()
}

func newReceiver(keep bool) *Receiver {
	return &Receiver{keep: keep, changed: make(chan struct{})}
}

// NewHTTP starts an OTLP/HTTP receiver on a free loopback port, stopped
// when the test ends.
func NewHTTP(tb testing.TB) *Receiver {
	tb.Helper()
	r, err := StartHTTP(true)
	if err != nil {
		tb.Fatalf("start OTLP/HTTP receiver: %v", err)
	}
	tb.Cleanup(r.Close)
	return r
}

// NewGRPC starts an OTLP/gRPC receiver on a free loopback port, stopped
// when the test ends.
func NewGRPC(tb testing.TB) *Receiver {
	tb.Helper()
	r, err := StartGRPC()
	if err != nil {
		tb.Fatalf("start OTLP/gRPC receiver: %v", err)
	}
	tb.Cleanup(r.Close)
	return r
}

// StartHTTP starts an OTLP/HTTP receiver on a free loopback port. With
// keep false it only counts spans (Count), for load tests.
func StartHTTP(keep bool) (*Receiver, error) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := newReceiver(keep)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }() // ends with Close
	r.Endpoint, r.Protocol = "http://"+ln.Addr().String(), "http/protobuf"
	r.close = func() { _ = srv.Close(); <-done }
	return r, nil
}

// StartGRPC starts an OTLP/gRPC receiver on a free loopback port.
func StartGRPC() (*Receiver, error) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := newReceiver(true)
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, grpcService{r: r})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }() // ends with Stop
	r.Endpoint, r.Protocol = "http://"+ln.Addr().String(), "grpc"
	r.close = func() { srv.Stop(); <-done }
	return r, nil
}

// Close stops the receiver.
func (r *Receiver) Close() { r.close() }

// serveHTTP answers one OTLP/HTTP export, as the specification says: the
// protobuf ExportTraceServiceRequest in, an ExportTraceServiceResponse out.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer func() { _ = zr.Close() }() // a bad stream fails the read
		body = zr
	}
	buf, err := io.ReadAll(body)
	var msg collectorpb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(buf, &msg)
	}
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an application/x-protobuf ExportTraceServiceRequest", http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{}) // an empty message always marshals
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

// Export implements the OTLP trace service.
func (s grpcService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// add records the spans of one export.
func (r *Receiver) add(req *collectorpb.ExportTraceServiceRequest) {
	var got []Span
	n := 0
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
			if !r.keep {
				continue
			}
			for _, sp := range ss.GetSpans() {
				got = append(got, toSpan(sp, res, ss.GetScope().GetName()))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.count += n
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
}

func toSpan(sp *tracepb.Span, res map[string]any, scope string) Span {
	out := Span{
		TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		Name: sp.GetName(), Kind: sp.GetKind(), Attrs: attrs(sp.GetAttributes()), Resource: res, Scope: scope,
		Status: sp.GetStatus().GetCode(), StatusMessage: sp.GetStatus().GetMessage(),
		Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano())), //nolint:gosec // nanoseconds since 1970 fit
	}
	if len(sp.GetParentSpanId()) > 0 {
		out.ParentSpanID = hex.EncodeToString(sp.GetParentSpanId())
	}
	for _, l := range sp.GetLinks() {
		out.Links = append(out.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Spans returns the spans received so far, in the order they arrived.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Count returns how many spans were received, kept or not.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Requests returns how many exports were received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// ErrTimeout is Await's error when the spans it waits for do not come.
var ErrTimeout = errors.New("otlptest: the spans waited for did not arrive")

// Await waits until done holds for the spans received, or ctx ends.
func (r *Receiver) Await(ctx context.Context, done func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return spans, ErrTimeout
		}
	}
}

// Wait is Await for a test: it fails tb if the spans do not arrive
// within timeout.
func (r *Receiver) Wait(tb testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	spans, err := r.Await(ctx, done)
	if err != nil {
		tb.Fatalf("%v within %s; got %d spans: %v", err, timeout, len(spans), Names(spans))
	}
	return spans
}

// Names returns the spans' names, for failure messages.
func Names(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// Find returns the spans named name.
func Find(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
