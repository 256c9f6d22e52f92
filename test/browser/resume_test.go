package browser

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// talkingAgent answers slowly enough for kerneld to be killed mid-answer:
// the test kills it once the console shows five words, and the answer's
// other words take seconds more, so that a loaded machine, slow to pass
// "step kill" from the browser to the test, still kills it mid-answer.
var talkingAgent = `
name: talking
description: Counts, slowly.
model:
  provider: scripted
  token_delay: 50ms
  script:
    - {text: "` + talkingAnswer + `"}
`

var talkingAnswer = countTo(100)

// countTo returns "1 2 3 ... n".
func countTo(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = strconv.Itoa(i + 1)
	}
	return strings.Join(words, " ")
}

// TestConsole_ResumedAfterKill kills the kerneld process serving the
// console (SIGKILL, as kill -9) while an answer streams, and starts it
// again on the same data and address: the console reconnects by itself
// and shows the run as one answer, the whole of it, with a small note
// that kerneld restarted; the text the kill cut short is not left behind.
func TestConsole_ResumedAfterKill(t *testing.T) {
	b := needBrowser(t)
	bin := buildKerneld(t)
	dataDir, agentsDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(agentsDir, "talking.yaml"), []byte(talkingAgent), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, bin, "127.0.0.1:0", dataDir, agentsDir)
	kills := 0
	shot := filepath.Join(t.TempDir(), "resumed.png")
	res := b.playSteps(t, &kerneld{url: p.url}, "resume", func(step string) {
		if step == "kill" {
			kills++
			p.kill(t)
			p = startBinary(t, bin, p.addr, dataDir, agentsDir)
		}
	}, "SCREENSHOT="+shot)

	if kills != 1 {
		t.Fatalf("kerneld was killed %d times, want once", kills)
	}
	equal(t, "conversation", messages(res.Transcript), []string{"user: count", "assistant: " + talkingAnswer})
	equal(t, "items", kinds(res.Transcript), []string{"message", "note note-resumed", "message"})
	t.Logf("screenshot: %s", shot)
}

// binaryProcess is a kerneld process started from the binary.
type binaryProcess struct {
	cmd  *exec.Cmd
	addr string
	url  string
	logs *lockedBuffer
}

// startBinary starts kerneld listening on addr and waits until it is
// ready.
func startBinary(t *testing.T, bin, addr, dataDir, agentsDir string) *binaryProcess {
	t.Helper()
	p := &binaryProcess{logs: &lockedBuffer{}}
	p.cmd = exec.Command(bin, "-addr", addr, "-config", "../../configs/kerneld.yaml",
		"-data-dir", dataDir, "-agents-dir", agentsDir)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("kerneld logs:\n%s", p.logs)
		}
	})
	listening := regexp.MustCompile(`msg="kerneld listening" addr=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(p.logs.String()); m != nil && p.addr == "" {
			p.addr, p.url = m[1], "http://"+m[1]
		}
		if p.url != "" {
			if res, err := http.Get(p.url + "/readyz"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kerneld did not become ready:\n%s", p.logs)
		}
	}
}

// kill kills p as kill -9 does and waits for it to be gone.
func (p *binaryProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// buildKerneld builds the kerneld binary once per test run.
func buildKerneld(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kerneld-browser-")
		if err != nil {
			errBuild = err
			return
		}
		built = filepath.Join(dir, "kerneld")
		if out, err := exec.Command("go", "build", "-o", built, "../../cmd/kerneld").CombinedOutput(); err != nil {
			errBuild = err
			t.Logf("go build: %s", out)
		}
	})
	if errBuild != nil {
		t.Fatalf("build kerneld: %v", errBuild)
	}
	return built
}

var (
	buildOnce sync.Once
	built     string
	errBuild  error
)

// lockedBuffer is a bytes.Buffer safe for a process and the test to share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
