package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger returns the process logger in the configured format.
func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.Level) // Validate already checked it
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// parseLevel reads a log level name.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return l, fmt.Errorf("log.level: must be debug, info, warn or error, not %q", s)
	}
	return l, nil
}
