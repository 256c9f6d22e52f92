package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/tools/mcp/mcptest"
)

// The test binary doubles as an MCP server over stdio: a config whose Env
// sets serverEnv to "1" re-executes it as one. startsEnv names a file it
// appends a line to each time it starts; ignoreStdinEnv makes it keep
// running after stdin closes, as server-everything does.
const (
	serverEnv      = "KERNELD_MCP_TEST_SERVER"
	startsEnv      = "KERNELD_MCP_TEST_STARTS"
	ignoreStdinEnv = "KERNELD_MCP_TEST_IGNORE_STDIN"
)

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		os.Exit(serveStdio())
	}
	goleak.VerifyTestMain(m)
}

// serveStdio serves the test server on stdin and stdout and returns the
// exit code.
func serveStdio() int {
	if path := os.Getenv(startsEnv); path != "" {
		if err := appendLine(path, fmt.Sprint(os.Getpid())); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	srv := mcptest.NewServer(func() { os.Exit(1) })
	if err := srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if os.Getenv(ignoreStdinEnv) == "1" {
		time.Sleep(time.Hour) // until signalled
	}
	return 0
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

// processGone reports whether pid has exited. A zombie counts: it runs
// nothing and waits only for its parent (or init) to reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	i := len(b) - 1
	for i > 0 && b[i] != ')' {
		i--
	}
	return i+2 < len(b) && b[i+2] == 'Z'
}
