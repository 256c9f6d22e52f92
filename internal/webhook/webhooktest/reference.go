package webhooktest

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// RequireEnv, set to 1, turns a missing reference verifier from a skip
// into a failure; CI sets it.
const RequireEnv = "KERNELD_REQUIRE_WEBHOOKS"

const install = "npm ci --prefix test/webhooks"

// Reference is test/webhooks/receiver.mjs running under node: a receiver
// that verifies with the Standard Webhooks reference library.
type Reference struct {
	URL   string
	lines chan string
}

// StartReference starts the reference receiver for secret, stopped when
// tb ends. Without node or the package it skips tb, or fails it when
// RequireEnv is 1.
func StartReference(tb testing.TB, secret string) *Reference {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(tb, "node is not on PATH")
	}
	dir := packageDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err != nil {
		skipOrFail(tb, "the standardwebhooks package is not installed")
	}
	cmd := exec.Command(node, filepath.Join(dir, "receiver.mjs"), secret) //nolint:noctx // stopped by closing stdin, then killed
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start the reference receiver: %v", err)
	}
	ref := &Reference{lines: make(chan string, 1000)}
	go func() {
		defer close(ref.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ref.lines <- sc.Text()
		}
	}()
	tb.Cleanup(func() { stopReference(cmd, stdin, ref.lines) })
	first := ref.Next(tb, 15*time.Second)
	port, ok := strings.CutPrefix(first, "listening ")
	if !ok {
		tb.Fatalf("reference receiver said %q, want listening <port>", first)
	}
	ref.URL = "http://127.0.0.1:" + port + "/hook"
	return ref
}

// stopReference closes the receiver's stdin, which ends it, and waits.
func stopReference(cmd *exec.Cmd, stdin io.Closer, lines chan string) {
	_ = stdin.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	for range lines { // drain what the reader goroutine still holds
	}
}

// Next returns the receiver's next line ("verified <id> <type>" or
// "rejected <reason>"), failing tb after timeout.
func (r *Reference) Next(tb testing.TB, timeout time.Duration) string {
	tb.Helper()
	line := r.next(tb, timeout)
	if rest, ok := strings.CutPrefix(line, "verified "); ok {
		if f := strings.SplitN(rest, " ", 3); len(f) == 3 {
			return "verified " + f[0] + " " + f[1] // without the payload
		}
	}
	return line
}

// Verified is a delivery the reference receiver verified.
type Verified struct {
	ID      string // its webhook-id
	Type    string
	Payload map[string]any // the body, as the library returned it
}

// NextVerified returns the next delivery the receiver verified, failing tb
// when it rejected one instead, or heard nothing within timeout.
func (r *Reference) NextVerified(tb testing.TB, timeout time.Duration) Verified {
	tb.Helper()
	line := r.next(tb, timeout)
	rest, ok := strings.CutPrefix(line, "verified ")
	f := strings.SplitN(rest, " ", 3)
	if !ok || len(f) != 3 {
		tb.Fatalf("the reference receiver said %q, want a verified delivery", line)
	}
	v := Verified{ID: f[0], Type: f[1]}
	if err := json.Unmarshal([]byte(f[2]), &v.Payload); err != nil {
		tb.Fatalf("the reference receiver printed a payload that is not JSON: %v", err)
	}
	return v
}

func (r *Reference) next(tb testing.TB, timeout time.Duration) string {
	tb.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			tb.Fatal("the reference receiver exited")
		}
		return line
	case <-time.After(timeout):
		tb.Fatalf("the reference receiver said nothing within %s", timeout)
		return ""
	}
}

func skipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%s; %s=1 requires the reference verifier: run `%s`", reason, RequireEnv, install)
	}
	tb.Skipf("%s: skipping the Standard Webhooks reference verifier test (run `%s`; set %s=1 to make this a failure)",
		reason, install, RequireEnv)
}

// packageDir is the repository's test/webhooks, found from this file.
func packageDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "test", "webhooks")
}
