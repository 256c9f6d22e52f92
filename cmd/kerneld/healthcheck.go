package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck probes a running kerneld's /healthz, for container health
// checks in images that have no curl. The address comes from --addr or
// KERNELD_ADDR; a wildcard host is probed on loopback.
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	f, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	addr := f.addr
	if addr == "" {
		addr = DefaultConfig().HTTP.Addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer func() { _ = res.Body.Close() }() // a probe: nothing to do if closing fails
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /healthz answered %s", res.Status)
	}
	return nil
}
