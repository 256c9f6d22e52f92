package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/kerneld/kerneld/internal/telemetry/otlptest"
)

// withTracing makes -tracing's two columns: builds' one build as it is
// (tracing off: no OTEL_* variable set) and the same build exporting its
// spans over OTLP/HTTP to a receiver in this process that accepts and
// counts them. The receiver runs on the load generator's CPU, not the
// server's. stop closes it and says how many spans it took.
func withTracing(builds *[]build, out io.Writer) (stop func(), err error) {
	if len(*builds) != 1 {
		return nil, errors.New("-tracing compares one build with itself: leave out -base")
	}
	rcv, err := otlptest.StartHTTP(false)
	if err != nil {
		return nil, fmt.Errorf("start the OTLP receiver: %w", err)
	}
	off, on := (*builds)[0], (*builds)[0]
	off.label += ", tracing off"
	on.label += ", tracing on"
	on.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + rcv.Protocol}
	*builds = []build{off, on}
	return func() {
		rcv.Close()
		_, _ = fmt.Fprintf(out, "\nThe OTLP receiver took %d spans in %d exports.\n", rcv.Count(), rcv.Requests()) // a footnote to the table
	}, nil
}
