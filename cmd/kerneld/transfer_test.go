package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// transferCmd runs the binary's export or import with args, stdin from
// in, and returns its stdout and stderr; ok is its exit status.
func transferCmd(t *testing.T, bin string, env []string, in []byte, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(in)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, exited := errors.AsType[*exec.ExitError](err); err != nil && !exited {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), err == nil
}

// TestTransfer_WalkthroughMovesToAnotherStore follows the README: a
// session made with the quick start's requests on SQLite is exported with
// the server stopped, imported into a fresh SQLite directory and into
// Redis and into PostgreSQL, verified, and served from each, whole, seq for seq; its next run
// continues the log.
func TestTransfer_WalkthroughMovesToAnotherStore(t *testing.T) {
	bin := buildBinary(t)
	src := t.TempDir()
	p := startProcess(t, bin, src, "../../configs/agents")
	id, log, msgs := walkthroughSession(t, p.base)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	<-p.done()

	_, errOut, ok := transferCmd(t, bin, nil, nil, "export", "-config", "../../configs/kerneld.yaml", "-data-dir", src+"x")
	require.False(t, ok, "export of a directory without a database must fail")
	assert.Contains(t, errOut, "no database to export")

	dump, errOut, ok := transferCmd(t, bin, nil, nil, "export", "-config", "../../configs/kerneld.yaml", "-data-dir", src)
	require.True(t, ok, "export: %s", errOut)
	require.Contains(t, errOut, "exported 1 sessions")

	targets := []struct {
		name  string
		flags func(t *testing.T) ([]string, []string) // the store's flags and environment
		serve func(t *testing.T, flags, env []string) string
	}{
		{"sqlite", func(t *testing.T) ([]string, []string) {
			return []string{"-data-dir", t.TempDir()}, nil
		}, func(t *testing.T, flags, _ []string) string {
			return startProcess(t, bin, flags[1], "../../configs/agents").base
		}},
		{"postgres", func(t *testing.T) ([]string, []string) {
			return []string{"-store", "postgres", "-postgres-url", pgtest.Schema(t)}, nil
		}, func(t *testing.T, flags, _ []string) string {
			return startWith(t, bin, append(flags, "-replica", "a")...).base
		}},
		{"redis", func(t *testing.T) ([]string, []string) {
			srv := redistest.Use(t)
			return []string{"-store", "redis", "-redis-url", srv.URL}, []string{"KERNELD_REDIS_PREFIX=" + srv.Prefix}
		}, func(t *testing.T, flags, env []string) string {
			c := newCluster(t, sharedStore{args: flags, env: env})
			c.agentsDir = "../../configs/agents"
			return c.start("a").base
		}},
	}
	for _, tc := range targets {
		t.Run(tc.name, func(t *testing.T) {
			flags, env := tc.flags(t)
			args := append([]string{"import", "-config", "../../configs/kerneld.yaml"}, flags...)
			_, errOut, ok := transferCmd(t, bin, env, []byte(dump[:len(dump)*2/3]), args...)
			require.False(t, ok, "a dump cut short must fail")
			assert.Contains(t, errOut, "cut short")
			assert.NotContains(t, errOut, "level=INFO", "the store's routine logs stay quiet")

			_, errOut, ok = transferCmd(t, bin, env, []byte(dump), args...)
			require.True(t, ok, "import: %s", errOut)
			assert.Contains(t, errOut, "imported 1 sessions", "the session begun is continued")

			_, errOut, ok = transferCmd(t, bin, env, []byte(dump), args...)
			require.False(t, ok, "a second import must refuse")
			assert.Contains(t, errOut, "was imported from this dump already")

			out, errOut, ok := transferCmd(t, bin, env, []byte(dump), append(args, "-verify")...)
			require.True(t, ok, "verify: %s %s", out, errOut)
			assert.Contains(t, out, "verified 1 sessions")

			base := tc.serve(t, flags, env)
			requireSameLog(t, log, eventLog(t, base, id))
			assert.Equal(t, msgs, history(t, base, id))
			next := runInline(t, base, id, "And again")
			assert.Equal(t, int64(len(log)+1), next[0].id, "the next run continues the log")
		})
	}
}

// startWith starts kerneld with the README's agents and args, and waits
// until it is ready.
func startWith(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{logs: &syncBuffer{}}
	p.cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-config", "../../configs/kerneld.yaml",
		"-agents-dir", "../../configs/agents"}, args...)...)
	p.cmd.Stderr = p.logs
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("kerneld logs:\n%s", p.logs.String())
		}
	})
	p.base = "http://" + waitAddr(t, p.logs.String)
	waitReady(t, p.base)
	return p
}

// walkthroughSession makes the README's session on base: created, run,
// run again streamed inline. It returns its id, log and history.
func walkthroughSession(t *testing.T, base string) (string, []json.RawMessage, []historyMessage) {
	t.Helper()
	status, s := request(t, "POST", base+"/sessions", `{"agent":"echo"}`)
	require.Equal(t, 201, status)
	id := s["id"].(string)
	runInline(t, base, id, "Hello from kerneld")
	runInline(t, base, id, "Streamed inline")
	status, _ = request(t, "PUT", base+"/sessions/"+id+"/memory/prefs", `{"value":{"lang":"en"}}`)
	require.Equal(t, 200, status)
	return id, eventLog(t, base, id), history(t, base, id)
}

// runInline runs input in session id, streamed inline, to its end.
func runInline(t *testing.T, base, id, input string) []sseFrame {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/sessions/"+id+"/run",
		strings.NewReader(`{"input":"`+input+`"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	frames := readUntil(t, res.Body, runEnded)
	require.Equal(t, "RUN_FINISHED", frames[len(frames)-1].event)
	return frames
}

// requireSameLog compares two event logs as the API serves them, event
// by event.
func requireSameLog(t *testing.T, want, got []json.RawMessage) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.JSONEq(t, string(want[i]), string(got[i]), "event %d", i+1)
	}
}
