// Package storetest is the conformance suite for kerneld's storage
// backends: every implementation of kernel.Store runs Run (and may run
// Benchmark) from its own tests, so the kernel can rely on one behaviour
// whichever backend is configured.
//
// It only exercises a store through kernel.Store, and through
// images.Store and schedule.Store in RunImages and RunSchedules, which a
// backend that keeps images and schedules runs too. It must not know any
// backend's internals, and it must not be imported outside tests.
//
// Times: fixtures carry microsecond precision in a non-UTC zone, and a
// backend must return them Equal (same instant; zone and monotonic reading
// may differ). Nanoseconds need not survive.
package storetest

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
)

// opener is Run's open: a fresh, empty store for one test, closed by a
// cleanup it registers with t.
type opener = func(t *testing.T) kernel.Store

// test is one conformance check, run on a fresh store.
type test struct {
	name string
	fn   func(t *testing.T, st kernel.Store)
}

// Run runs the conformance suite against the stores open returns. Each
// subtest gets a fresh, empty store; open must close it with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) kernel.Store) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"sessions", sessionTests},
		{"runs", runTests},
		{"start", startTests},
		{"messages", messageTests},
		{"memory", memoryTests},
		{"events", eventTests},
		{"concurrency", concurrencyTests},
		{"delete", deleteTests},
		{"leases", leaseTests},
		{"versions", versionTests},
		{"constraints", constraintTests},
		{"transfer", transferTests},
	}
	t.Run("ping", func(t *testing.T) {
		require.NoError(t, open(t).Ping(t.Context()))
	})
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { runGroup(t, open, g.tests) })
	}
}

func runGroup(t *testing.T, open opener, tests []test) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { forgetStore(st) })
			tc.fn(t, st)
		})
	}
}

// epoch is the base of every fixture time: microsecond precision, and a
// zone other than UTC so a backend that drops the offset is caught.
var epoch = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.FixedZone("UTC+2", 2*60*60))

// at returns the fixture time n seconds after epoch.
func at(n int) time.Time { return epoch.Add(time.Duration(n) * time.Second) }

// newID returns a UUIDv7 string; successive calls sort in call order.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// requireErr fails t unless err is of kind and, when code is not empty,
// carries that errdefs code.
func requireErr(t *testing.T, err error, kind error, code string) {
	t.Helper()
	require.ErrorIs(t, err, kind)
	if code != "" {
		assert.Equal(t, code, string(errdefs.CodeOf(err)), "errdefs code of %v", err)
	}
}

// requireNotFound fails t unless err is ErrNotFound with code.
func requireNotFound(t *testing.T, err error, code string) {
	t.Helper()
	requireErr(t, err, errdefs.ErrNotFound, code)
}

// utc returns t in UTC without a monotonic reading, so times of the same
// instant compare equal whatever zone a backend returns them in.
func utc(t time.Time) time.Time { return t.UTC() }

// normSession makes s comparable with require.Equal across backends.
// AgentState is compared as JSON: a backend may store it compacted.
func normSession(s session.Session) session.Session {
	s.CreatedAt, s.UpdatedAt, s.ExpiresAt = utc(s.CreatedAt), utc(s.UpdatedAt), utc(s.ExpiresAt)
	if len(s.Metadata) == 0 {
		s.Metadata = nil
	}
	if len(s.AgentState) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, s.AgentState) == nil {
			s.AgentState = b.Bytes()
		}
	} else {
		s.AgentState = nil
	}
	return s
}

// normRun makes r comparable with require.Equal across backends.
func normRun(r session.Run) session.Run {
	r.CreatedAt, r.StartedAt, r.EndedAt = utc(r.CreatedAt), utc(r.StartedAt), utc(r.EndedAt)
	if len(r.Decisions) == 0 {
		r.Decisions = nil
	} else {
		r.Decisions = slices.Clone(r.Decisions)
		for i := range r.Decisions {
			r.Decisions[i].At = utc(r.Decisions[i].At)
		}
	}
	return r
}

// normMessage makes m comparable with require.Equal across backends.
func normMessage(m session.Message) session.Message {
	m.CreatedAt = utc(m.CreatedAt)
	if len(m.ToolCalls) == 0 {
		m.ToolCalls = nil
	}
	return m
}

// normEntry makes e comparable with require.Equal across backends.
func normEntry(e session.MemoryEntry) session.MemoryEntry {
	e.UpdatedAt = utc(e.UpdatedAt)
	return e
}

// normEvent makes e comparable with require.Equal across backends.
func normEvent(e session.Event) session.Event {
	e.Time = utc(e.Time)
	if len(e.Meta) == 0 {
		e.Meta = nil
	}
	return e
}

// normAll applies norm to every element of a copy of xs; nil and empty
// both become empty.
func normAll[T any](xs []T, norm func(T) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = norm(x)
	}
	return out
}
