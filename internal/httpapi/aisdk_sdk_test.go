package httpapi_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kerneld/kerneld/internal/httpapi"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
)

// An app built on the Vercel AI SDK holds chats with kerneld through the
// real `ai` package (test/aisdk/chat.mjs): sends, tool calls, approvals,
// resume, regenerate, cut streams and tenants, each transcript checked
// with the SDK's validateUIMessages.
func TestAISDKWithTheSDK(t *testing.T) {
	script := aisdkHarness(t)
	ts := newServer(t, serverOptions{
		kernel: kerneltest.Options{Agents: aisdkAgents()},
		api:    httpapi.Options{APIKeys: map[string]string{"k1": "acme", "k2": "other"}},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", script, ts.URL, "k1", "k2").CombinedOutput()
	if err != nil {
		t.Errorf("node %s: %v\n%s", script, err, out)
		return
	}
	t.Logf("%s", out)
}

// aisdkHarness returns the path of test/aisdk/chat.mjs, or skips t when
// node or the harness's modules are missing (fails it instead under
// KERNELD_REQUIRE_AISDK=1, which CI sets).
func aisdkHarness(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "aisdk"))
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "node is not on PATH; install Node.js 20 or later"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "ai")); err != nil {
		why = "the `ai` package is not installed; run `npm ci --prefix test/aisdk` (or make testdeps)"
	}
	switch {
	case why == "":
		return filepath.Join(dir, "chat.mjs")
	case os.Getenv("KERNELD_REQUIRE_AISDK") == "1":
		t.Fatalf("AI SDK harness unavailable: %s (KERNELD_REQUIRE_AISDK=1 requires it)", why)
	}
	t.Skipf("skip AI SDK tests: %s; set KERNELD_REQUIRE_AISDK=1 to fail instead", why)
	return ""
}
