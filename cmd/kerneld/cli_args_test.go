package main

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRun_ClientFlagsBeforeCommand: a command's own flags may come before
// it, as people type them; a server flag there is refused, saying why.
func TestRun_ClientFlagsBeforeCommand(t *testing.T) {
	srv := cliServer(t)
	for _, args := range [][]string{
		{"--url", srv.URL, "agents"},
		{"-url=" + srv.URL, "agents"},
		{"--json", "--url", srv.URL, "agents"},
		{"--url", srv.URL, "--api-key", "unused", "agents", "--json"},
	} {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		err := run(ctx, args, env(nil), &out, &errOut)
		cancel()
		require.NoError(t, err, "%q: %s", args, errOut.String())
		assert.Contains(t, out.String(), "echo", "%q lists the agents", args)
	}

	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"--addr", "127.0.0.1:0", "agents"}, env(nil), &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"agents" is a client command`)
}

// TestRun_HelpNamesCommands: kerneld --help, where a newcomer looks
// first, lists the client commands and their flags besides the server's.
func TestRun_HelpNamesCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"--help"}, env(nil), &out, &errOut))
	help := errOut.String()
	for _, want := range []string{"Usage: kerneld [flags]", "-addr", "kerneld COMMAND", "chat AGENT", "watch SESSION", "--url URL"} {
		assert.Contains(t, help, want)
	}
}

// TestCLI_Errors: an error is printed once after "kerneld: ", and a
// kerneld that is not there is named with what to do.
func TestCLI_Errors(t *testing.T) {
	srv := cliServer(t)
	cmd := exec.CommandContext(t.Context(), buildBinary(t), "sessions", "get", "nope")
	cmd.Env = append(cmd.Environ(), "KERNELD_URL="+srv.URL)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, "kerneld: 404 session_not_found: session \"nope\" not found\n", string(out))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = cliOutput(t, closed, "agents")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "no kerneld answers at "+closed+": start one (make run)"), err.Error())
}
