package mcp

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestServer_FailLocked(t *testing.T) {
	m := NewManager(Options{MinBackoff: time.Second, MaxBackoff: 8 * time.Second})
	t.Cleanup(func() { _ = m.Close(t.Context()) })
	s := newServer(m, ServerConfig{Name: "s", Command: "srv"})
	boom := errors.New("boom")

	steps := []struct {
		name    string
		upSince time.Time
		want    time.Duration
	}{
		{"FirstFailure", time.Time{}, time.Second},
		{"SecondFailedStart", time.Time{}, 2 * time.Second},
		{"CrashSoonAfterStart", time.Now(), 4 * time.Second},
		{"AnotherFailure", time.Time{}, 8 * time.Second},
		{"AtMostMaxBackoff", time.Time{}, 8 * time.Second},
		{"CrashAfterHealthyRun", time.Now().Add(-time.Minute), time.Second},
	}
	for _, step := range steps {
		// Bracketed by the clock, not within a margin of it: however long
		// the machine takes, the next start is want after the failure.
		before := time.Now()
		s.failLocked(boom, step.upSince)
		after := time.Now()
		assert.False(t, s.retryAt.Before(before.Add(step.want)) || s.retryAt.After(after.Add(step.want)),
			"%s: next start at %v, want %v after a failure between %v and %v", step.name, s.retryAt, step.want, before, after)
		assert.Equal(t, "failed", s.state.String())
	}
}

func TestServerEnv(t *testing.T) {
	ours := map[string]string{"PATH": "/usr/bin", "HOME": "/home/k", "OPENAI_API_KEY": "sk-secret", "USER": "k"}
	lookup := func(k string) (string, bool) { v, ok := ours[k]; return v, ok }
	got := serverEnv(lookup, map[string]string{"TOKEN": "t", "PATH": "/opt/bin"})
	assert.Equal(t, []string{"HOME=/home/k", "PATH=/usr/bin", "USER=k", "PATH=/opt/bin", "TOKEN=t"}, got,
		"inherited variables that are set, then configured ones (exec keeps the last PATH)")
}
