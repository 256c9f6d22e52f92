package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listening = regexp.MustCompile(`msg="kerneld listening" addr=(\S+)`)

// startTimeout bounds how long a test waits for kerneld to listen and be
// ready: with -race on a loaded machine, opening and recovering a store
// has taken more than 15 s.
const startTimeout = 60 * time.Second

// waitAddr waits for the "listening" log line and returns the address.
func waitAddr(t *testing.T, logs func() string) string {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(logs()); m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("kerneld did not start; logs:\n%s", logs())
	return ""
}

func post(t *testing.T, url, body string) map[string]any {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode >= 300 {
		t.Fatalf("POST %s = %d %v %v", url, res.StatusCode, m, err)
	}
	return m
}

// TestRun_ServeAndShutdown starts kerneld in-process on the repository's
// agents, streams a run, and stops it: the stream must end at once, and
// run must return within the shutdown timeout, though the run's model call
// lasts longer (it is drained until the budget, then handed off).
func TestRun_ServeAndShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	args := []string{"-addr", "127.0.0.1:0", "-agents-dir", "../../configs/agents", "-config", "../../configs/kerneld.yaml",
		"-data-dir", t.TempDir()}
	go func() { done <- run(ctx, args, env(nil), io.Discard, logs) }()
	base := "http://" + waitAddr(t, logs.String)
	waitReady(t, base)

	id := post(t, base+"/sessions", `{"agent":"echo"}`)["id"].(string)
	post(t, base+"/sessions/"+id+"/run", `{"input":"`+strings.Repeat("word ", 500)+`"}`)
	res, err := http.Get(base + "/sessions/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	for line := ""; !strings.Contains(line, "TEXT_MESSAGE_CONTENT"); {
		if line, err = r.ReadString('\n'); err != nil {
			t.Fatalf("read stream: %v", err)
		}
	}

	start := time.Now()
	cancel() // what SIGTERM does through signal.NotifyContext
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
	t.Logf("the stream ended %v after the stop", time.Since(start))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within the shutdown timeout")
	}
	t.Logf("shutdown took %v", time.Since(start))
}

func TestRun_Version(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}} {
		var out bytes.Buffer
		if err := run(t.Context(), args, env(nil), &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "kerneld ") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
}

// TestRun_BadAgentFile: a bad agent file stops startup with an error that
// names the file and the field.
func TestRun_BadAgentFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "good.yaml", "name: ok\nmodel: {provider: scripted, script: [{text: hi}]}\n")
	bad := writeFile(t, dir, "bad.yaml", "name: broken\nmodel: {provider: scripted, script: [{text: hi}]}\ntools: [teleport]\n")
	err := run(t.Context(), []string{"-addr", "127.0.0.1:0", "-agents-dir", dir, "-data-dir", t.TempDir()}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "tools[0]") {
		t.Fatalf("error = %v, want it to name %s and tools[0]", err, bad)
	}
}

// TestProcess_SIGTERM runs the real binary and stops it with SIGTERM while
// a run streams a model call longer than the shutdown timeout: it must
// exit 0 within that timeout, the run handed off where it was, for the
// next start to continue.
func TestProcess_SIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-agents-dir", "../../configs/agents", "-config", "../../configs/kerneld.yaml",
		"-data-dir", t.TempDir())
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	base := "http://" + waitAddr(t, logs.String)
	waitReady(t, base)
	id := post(t, base+"/sessions", `{"agent":"echo"}`)["id"].(string)
	post(t, base+"/sessions/"+id+"/run", `{"input":"`+strings.Repeat("word ", 500)+`"}`)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit within the shutdown timeout\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "run handed off for another process to continue") {
		t.Errorf("the active run was not handed off:\n%s", logs.String())
	}
}

// buildBinary builds kerneld once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kerneld-bin-")
		if err != nil {
			errBuild = err
			return
		}
		built = filepath.Join(dir, "kerneld")
		if out, err := exec.Command("go", "build", "-o", built, ".").CombinedOutput(); err != nil {
			errBuild = fmt.Errorf("build: %w\n%s", err, out)
		}
	})
	if errBuild != nil {
		t.Fatal(errBuild)
	}
	return built
}

var (
	builtOnce sync.Once
	built     string
	errBuild  error
)

var metricsListening = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

// TestRun_MetricsAddr: with --metrics-addr, /metrics is served there, to
// operator keys only when they are set, and the API's listener serves
// none.
func TestRun_MetricsAddr(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	args := []string{"-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0", "-agents-dir", "../../configs/agents",
		"-config", "../../configs/kerneld.yaml", "-store", "memory"}
	getenv := env(map[string]string{"KERNELD_API_KEYS": "k1:acme", "KERNELD_ADMIN_KEYS": "ops"})
	go func() { done <- run(ctx, args, getenv, io.Discard, logs) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + waitAddr(t, logs.String)
	var metricsBase string
	for deadline := time.Now().Add(startTimeout); metricsBase == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := metricsListening.FindStringSubmatch(logs.String()); m != nil {
			metricsBase = "http://" + m[1]
		}
	}
	if metricsBase == "" {
		t.Fatalf("no metrics listener in the logs:\n%s", logs.String())
	}
	get := func(url, key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	pollUntil(t, "kerneld ready", func() bool { status, _ := get(base+"/readyz", "k1"); return status == http.StatusOK })
	if status, body := get(metricsBase+"/metrics", "ops"); status != http.StatusOK || !strings.Contains(body, "kerneld_") {
		t.Errorf("metrics listener with the operator key = %d, want 200 with kerneld's metrics:\n%.300s", status, body)
	}
	if status, _ := get(metricsBase+"/metrics", "k1"); status != http.StatusUnauthorized {
		t.Errorf("metrics listener with a tenant key = %d, want 401", status)
	}
	if status, body := get(base+"/metrics", "ops"); status != http.StatusNotFound || !strings.Contains(body, "metrics_disabled") {
		t.Errorf("API listener /metrics = %d %s, want 404 metrics_disabled", status, body)
	}
}

// pollUntil polls cond until it holds, failing the test after 15 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
