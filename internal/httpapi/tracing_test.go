package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/telemetry"
	"github.com/kerneld/kerneld/internal/telemetry/otlptest"
)

// newTracing returns tracing that exports to a receiver of its own.
func newTracing(t *testing.T) (*telemetry.Tracing, *otlptest.Receiver) {
	t.Helper()
	rcv := otlptest.NewHTTP(t)
	tr, err := telemetry.New(t.Context(), telemetry.Options{Getenv: func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return rcv.Endpoint
		}
		return ""
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Shutdown(t.Context()) })
	return tr, rcv
}

func TestTraceRequests(t *testing.T) {
	tr, rcv := newTracing(t)
	ts := newServer(t, serverOptions{api: httpapi.Options{Tracing: tr}})

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	created := ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`,
		"traceparent", "00-"+traceID+"-"+parentID+"-01")
	ts.must(t, http.StatusNotFound, "GET", "/sessions/"+created["id"].(string)+"x", "")
	require.NoError(t, tr.Shutdown(t.Context()))

	spans := rcv.Wait(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) >= 2 })
	create := otlptest.Find(spans, "POST /sessions")
	require.Len(t, create, 1, "spans: %v", otlptest.Names(spans))
	assert.Equal(t, traceID, create[0].TraceID, "the caller's traceparent is the parent")
	assert.Equal(t, parentID, create[0].ParentSpanID)
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, create[0].Kind)
	assert.Equal(t, int64(http.StatusCreated), create[0].Attrs["http.response.status_code"])
	assert.Equal(t, "/sessions", create[0].Attrs["http.route"])
	assert.Equal(t, "POST", create[0].Attrs["http.request.method"])
	assert.NotEmpty(t, create[0].Attrs["kerneld.request_id"])

	get := otlptest.Find(spans, "GET /sessions/{id}")
	require.Len(t, get, 1, "spans: %v", otlptest.Names(spans))
	assert.NotEqual(t, traceID, get[0].TraceID, "a request without traceparent starts its own trace")
	assert.Empty(t, get[0].ParentSpanID)
	assert.Equal(t, int64(http.StatusNotFound), get[0].Attrs["http.response.status_code"])
	assert.Equal(t, tracepb.Status_STATUS_CODE_UNSET, get[0].Status, "a 4xx is the client's error, not the server's")
}

func TestTraceRequests_OffWithoutTracing(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	ts := newServer(t, serverOptions{api: httpapi.Options{Tracing: telemetry.Disabled()}})
	ts.must(t, http.StatusCreated, "POST", "/sessions", `{"agent":"echo"}`,
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	assert.Zero(t, rcv.Requests())
}
