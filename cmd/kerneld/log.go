package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/kerneld/kerneld/internal/telemetry"
)

// newLogger returns the process logger in the configured format. With
// tracing on, a line logged within a span carries its trace_id and
// span_id.
func newLogger(c LogConfig, w io.Writer, traced bool) *slog.Logger {
	level, _ := parseLevel(c.Level) // Validate already checked it
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	if traced {
		h = telemetry.LogHandler(h)
	}
	return slog.New(h)
}

// parseLevel reads a log level name.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return l, fmt.Errorf("log.level: must be debug, info, warn or error, not %q", s)
	}
	return l, nil
}
