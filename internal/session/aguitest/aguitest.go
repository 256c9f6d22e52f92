// Package aguitest checks, from tests, that a sequence of kerneld events is a
// valid AG-UI 1.0 stream, as the official npm packages (@ag-ui/core's event
// schemas, @ag-ui/client's verifyEvents) judge it, plus kerneld's own stream
// shape (DESIGN.md §4).
//
// The check runs test/agui/verify.mjs under Node. It needs node on PATH and
// the harness's modules installed (npm ci --prefix test/agui). Without them
// the checks skip, unless KERNELD_REQUIRE_AGUI=1, which CI sets: then they
// fail.
package aguitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

var (
	// ErrUnavailable means the checker cannot run here: node is not on PATH
	// or the harness's node modules are not installed.
	ErrUnavailable = errors.New("AG-UI checker unavailable")
	// ErrRejected means the checker ran and rejected the events.
	ErrRejected = errors.New("not a valid AG-UI stream")
)

// timeout bounds one run of the checker.
const timeout = 60 * time.Second

// Verify fails tb unless events, in their wire form, are a valid AG-UI
// stream. See VerifyJSON for when it skips.
func Verify(tb testing.TB, events []session.Event) {
	tb.Helper()
	VerifyLogs(tb, [][]session.Event{events})
}

// VerifyLogs is Verify for several independent logs (say, of several
// sessions) in one run of the checker, which is much faster than one run
// per log.
func VerifyLogs(tb testing.TB, logs [][]session.Event) {
	tb.Helper()
	objects := make([][][]byte, len(logs))
	for i, events := range logs {
		objects[i] = make([][]byte, len(events))
		for j := range events {
			objects[i][j], _ = events[j].MarshalJSON() // never fails
		}
	}
	report(tb, objects)
}

// VerifyJSON is Verify for callers that already hold the wire objects, for
// example the data lines of an SSE stream. When the checker is unavailable
// it skips tb, or fails it if KERNELD_REQUIRE_AGUI is "1".
func VerifyJSON(tb testing.TB, objects [][]byte) {
	tb.Helper()
	report(tb, [][][]byte{objects})
}

// VerifyJSONLogs is VerifyJSON for many logs at once, in one run of the
// checker.
func VerifyJSONLogs(tb testing.TB, logs [][][]byte) {
	tb.Helper()
	report(tb, logs)
}

func report(tb testing.TB, logs [][][]byte) {
	tb.Helper()
	out, err := CheckLogs(logs)
	switch {
	case errors.Is(err, ErrUnavailable):
		unavailable(tb, err)
	case err != nil:
		tb.Errorf("%v\n%s", err, out)
	}
}

// Check runs the checker on objects, the wire JSON objects of a sequence of
// events, and returns its output. The error wraps ErrRejected when the
// checker rejects the events and ErrUnavailable when it cannot run.
func Check(objects [][]byte) (output string, err error) {
	return CheckLogs([][][]byte{objects})
}

// CheckLogs is Check for several independent logs, checked in one run.
func CheckLogs(logs [][][]byte) (output string, err error) {
	script, err := harness()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "kerneld-agui-")
	if err != nil {
		return "", fmt.Errorf("write events: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }() // temp files; the OS cleans up what this misses
	files := make([]string, len(logs))
	for i, objects := range logs {
		files[i] = filepath.Join(dir, fmt.Sprintf("log%d.json", i))
		body := append(append([]byte("[\n"), bytes.Join(objects, []byte(",\n"))...), "\n]\n"...)
		if err := os.WriteFile(files[i], body, 0o600); err != nil {
			return "", fmt.Errorf("write events: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", append([]string{script}, files...)...).CombinedOutput()
	output = string(out)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return output, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1 && strings.Contains(output, "FAIL "):
		return output, ErrRejected
	case ctx.Err() != nil:
		return output, fmt.Errorf("run %s: no answer within %v", script, timeout)
	default:
		return output, fmt.Errorf("run %s: %w", script, err)
	}
}

// RunScript runs the harness script name (a file in test/agui) under Node
// with args, and fails tb with its output unless it exits 0. Without Node
// or the harness's modules it skips tb, or fails it if
// KERNELD_REQUIRE_AGUI is "1".
func RunScript(tb testing.TB, name string, args ...string) {
	tb.Helper()
	script, err := harness()
	if err != nil {
		unavailable(tb, err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), timeout)
	defer cancel()
	path := filepath.Join(filepath.Dir(script), name)
	out, err := exec.CommandContext(ctx, "node", append([]string{path}, args...)...).CombinedOutput()
	if err != nil {
		tb.Errorf("node %s: %v\n%s", name, err, out)
		return
	}
	tb.Logf("node %s:\n%s", name, out)
}

// unavailable skips tb, the checker being unavailable for err, or fails
// it if KERNELD_REQUIRE_AGUI is "1".
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("KERNELD_REQUIRE_AGUI") == "1" {
		tb.Fatalf("%v (KERNELD_REQUIRE_AGUI=1 requires the check)", err)
	}
	tb.Skipf("skip AG-UI check: %v; set KERNELD_REQUIRE_AGUI=1 to fail instead", err)
}

// harness returns the path of verify.mjs, or an error wrapping
// ErrUnavailable that says what to install.
func harness() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("%w: node is not on PATH; install Node.js 20 or later, then run `npm ci --prefix test/agui` in the repository root", ErrUnavailable)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	dir := filepath.Join(root, "test", "agui")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client")); err != nil {
		return "", fmt.Errorf("%w: the harness's node modules are not installed in %s; run `npm ci --prefix test/agui` in %s", ErrUnavailable, dir, root)
	}
	return filepath.Join(dir, "verify.mjs"), nil
}

// moduleRoot walks up from the working directory to the directory that
// holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
