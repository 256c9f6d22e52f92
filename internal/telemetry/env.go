package telemetry

import (
	"fmt"
	"net/url"
	"strings"
)

// protocol is an OTLP transport, named as OTEL_EXPORTER_OTLP_PROTOCOL
// names it.
type protocol string

const (
	protocolHTTP protocol = "http/protobuf" // the specification's default
	protocolGRPC protocol = "grpc"
)

// exporterConfig is what the OTEL_* variables say about exporting traces.
type exporterConfig struct {
	disabled bool     // OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
	endpoint string   // the full URL spans are sent to; "" when none is set
	protocol protocol // how they are sent
}

// enabled reports whether traces are to be exported.
func (c exporterConfig) enabled() bool { return !c.disabled && c.endpoint != "" }

// readExporterConfig reads the variables of the OpenTelemetry
// specification ("Environment Variable Specification", "OTLP Exporter
// Configuration") that decide whether and where traces go. Values it
// cannot honour are errors, so that a misspelt protocol does not silently
// turn tracing off.
func readExporterConfig(getenv func(string) string) (exporterConfig, error) {
	var c exporterConfig
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return exporterConfig{disabled: true}, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return exporterConfig{disabled: true}, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER: kerneld exports traces with otlp (or none), not %q", exp)
	}
	p := firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch protocol(p) {
	case "", protocolHTTP:
		c.protocol = protocolHTTP
	case protocolGRPC:
		c.protocol = protocolGRPC
	default:
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: kerneld sends traces over http/protobuf or grpc, not %q", p)
	}
	endpoint, err := tracesEndpoint(getenv, c.protocol)
	c.endpoint = endpoint
	return c, err
}

// tracesEndpoint returns the URL traces are sent to. The signal-specific
// variable is used as it is; the generic one is a base URL to which HTTP
// appends /v1/traces (gRPC takes it as it is).
func tracesEndpoint(getenv func(string) string, p protocol) (string, error) {
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	signal := raw != ""
	if !signal {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: want a URL such as http://localhost:4318, not %q", name, raw)
	}
	if !signal && p == protocolHTTP {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// firstSet returns the value of the first of names that is set.
func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
