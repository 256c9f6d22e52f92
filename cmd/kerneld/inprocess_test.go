package main

import (
	"context"
	"io"
	"testing"
)

// inProcess is kerneld started by run in the test's process, on the
// repository's config and agents, a loopback port and a fresh data
// directory.
type inProcess struct {
	base   string      // http://127.0.0.1:port
	logs   *syncBuffer // what it logged
	cancel context.CancelFunc
	done   chan error
}

// startInProcess starts kerneld with getenv and waits until it is ready.
func startInProcess(t *testing.T, getenv func(string) string) *inProcess {
	t.Helper()
	return startInProcessWith(t, getenv, "../../configs/agents")
}

// startInProcessWith starts kerneld with getenv on the agents of
// agentsDir and waits until it is ready.
func startInProcessWith(t *testing.T, getenv func(string) string, agentsDir string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	p := &inProcess{logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	args := []string{"-addr", "127.0.0.1:0", "-agents-dir", agentsDir, "-config", "../../configs/kerneld.yaml",
		"-data-dir", t.TempDir()}
	go func() { p.done <- run(ctx, args, getenv, io.Discard, p.logs) }()
	t.Cleanup(func() { cancel(); <-p.done })
	p.base = "http://" + waitAddr(t, p.logs.String)
	waitReady(t, p.base)
	return p
}

// stop shuts kerneld down as SIGTERM would and returns run's error.
func (p *inProcess) stop() error {
	p.cancel()
	err := <-p.done
	p.done <- err // for the cleanup
	return err
}
