package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// mustNewManager returns a Manager logging to the test's output, closed
// when the test ends.
func mustNewManager(tb testing.TB, opts mcp.Options) *mcp.Manager {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m := mcp.NewManager(opts)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return m
}

// stdioConfig returns a config that runs the test binary as the test
// server, with env added to its environment.
func stdioConfig(tb testing.TB, env map[string]string) mcp.ServerConfig {
	tb.Helper()
	exe, err := os.Executable()
	require.NoError(tb, err)
	cfg := mcp.ServerConfig{Name: "t", Command: exe, Env: map[string]string{
		serverEnv: "1",
		"GORACE":  "atexit_sleep_ms=0", // a -race binary otherwise sleeps 1s before exiting
	}}
	for k, v := range env {
		cfg.Env[k] = v
	}
	return cfg
}

// transportCase is a way of reaching the test server.
type transportCase struct {
	name   string
	config func(tb testing.TB) mcp.ServerConfig
}

// transports are stdio (the test binary as a child) and streamable HTTP
// (an httptest server).
var transports = []transportCase{
	{"stdio", func(tb testing.TB) mcp.ServerConfig { return stdioConfig(tb, nil) }},
	{"http", func(tb testing.TB) mcp.ServerConfig {
		return mcp.ServerConfig{Name: "t", URL: mcptest.ServeHTTP(tb).URL}
	}},
}

// mustTools returns the server's tools by name.
func mustTools(tb testing.TB, m *mcp.Manager, cfg mcp.ServerConfig) map[string]tools.Tool {
	tb.Helper()
	ts, err := m.Tools(tb.Context(), cfg)
	require.NoError(tb, err)
	byName := make(map[string]tools.Tool, len(ts))
	for _, t := range ts {
		byName[t.Definition().Name] = t
	}
	return byName
}

// call calls t with args given as a Go value.
func call(tb testing.TB, t tools.Tool, args any) (string, error) {
	tb.Helper()
	require.NotNil(tb, t, "tool")
	b, err := json.Marshal(args)
	require.NoError(tb, err)
	return t.Call(tb.Context(), tools.Call{Arguments: b})
}

// mustPID asks the test server for its process ID.
func mustPID(tb testing.TB, byName map[string]tools.Tool) int {
	tb.Helper()
	out, err := call(tb, byName["t__pid"], map[string]any{})
	require.NoError(tb, err)
	pid, err := strconv.Atoi(out)
	require.NoError(tb, err)
	return pid
}

// countLines returns the number of lines in the file at path, 0 if it does
// not exist.
func countLines(tb testing.TB, path string) int {
	tb.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(tb, err)
	return bytes.Count(b, []byte("\n"))
}

// sortedNames returns the names of byName, sorted.
func sortedNames(byName map[string]tools.Tool) []string {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// procGroup returns the process group of pid from /proc.
func procGroup(tb testing.TB, pid int) int {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	pgrp, err := strconv.Atoi(f[2])
	require.NoError(tb, err)
	return pgrp
}

// childPIDs returns the processes whose parent is this one.
func childPIDs(tb testing.TB) []int {
	tb.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(tb, err)
	var children []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			children = append(children, pid)
		}
	}
	return children
}

// liveGroupMembers returns the processes of group pgid that are not
// zombies.
func liveGroupMembers(tb testing.TB, pgid int) []int {
	tb.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(tb, err)
	var live []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			live = append(live, pid)
		}
	}
	return live
}

// requireProcfs skips tests that inspect processes where there is no
// /proc.
func requireProcfs(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		tb.Skip("no /proc: cannot inspect child processes here")
	}
}
