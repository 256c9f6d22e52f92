package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLI_Inbox lists a waiting run's calls with the command that decides
// each; one "approve --always" then decides both, and the inbox empties.
func TestCLI_Inbox(t *testing.T) {
	srv := cliServer(t)
	r := startCLI(t, srv.URL, nil, "run", "gated", "save")
	r.waitOutput(t, regexp.MustCompile(`(?s)needs approval: .*needs approval: `))

	decide := regexp.MustCompile(`(?m)^\S+\s+gated\s+memory_set\s+\{.*\}\s+.*kerneld approve (\S+) (\S+) (\S+)$`)
	var out string
	require.Eventually(t, func() bool {
		var err error
		out, err = cliOutput(t, srv.URL, "inbox", "--agent", "gated")
		return err == nil && len(decide.FindAllString(out, -1)) == 2
	}, 10*time.Second, 10*time.Millisecond, "the inbox never listed both calls")
	m := decide.FindStringSubmatch(out)
	got, err := cliOutput(t, srv.URL, "approve", m[1], m[2], m[3], "--always")
	require.NoError(t, err)
	assert.Equal(t, "approved memory_set (call "+m[3]+")\n", got)

	require.NoError(t, r.wait(t), "the run ends with no second decision")
	assert.True(t, strings.HasSuffix(r.stdout.String(), "Done.\n"), r.stdout.String())
	out, err = cliOutput(t, srv.URL, "inbox")
	require.NoError(t, err)
	assert.Equal(t, "SESSION  AGENT  TOOL  ARGUMENTS  EXPIRES  DECIDE WITH\n", out)
}
