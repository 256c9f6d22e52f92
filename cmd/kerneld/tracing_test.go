package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/telemetry/otlptest"
)

// TestRun_Tracing starts kerneld with an OTLP endpoint in its environment:
// a request's span reaches the receiver, under the caller's trace, by the
// time run returns, and the request's log line names the trace.
func TestRun_Tracing(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	d := startInProcess(t, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint}))
	base, logs := d.base, d.logs

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/sessions", strings.NewReader(`{"agent":"echo"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /sessions = %d", res.StatusCode)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	// run flushed its spans before returning: no waiting here.
	spans := otlptest.Find(rcv.Spans(), "POST /sessions")
	if len(spans) != 1 || spans[0].TraceID != traceID || spans[0].Resource["service.name"] != "kerneld" {
		t.Fatalf("spans = %+v, want one POST /sessions in trace %s from kerneld", spans, traceID)
	}
	if !strings.Contains(logs.String(), "trace_id="+traceID) {
		t.Errorf("no log line carries the trace id; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "tracing=otlp") {
		t.Errorf("the startup line does not say tracing is on; logs:\n%s", logs.String())
	}
}
