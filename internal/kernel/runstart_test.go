package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
)

func (s *countingStore) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	s.writes.Add(1)
	s.starts.Add(1)
	return s.Store.StartRun(ctx, token, st)
}

// TestRun_StartsInOneWrite: a run posted to an idle session starts in one
// StartRun, creating no run on its own, and its session's driver lists the
// session's runs only once in the whole run, the request's look included.
func TestRun_StartsInOneWrite(t *testing.T) {
	cs := &countingStore{Store: memory.New()}
	k, rec := newKernel(t, kerneltest.Options{Store: cs})
	s := mustSession(t, k.Kernel, "echo")
	for i := range 3 {
		lists := cs.lists.Load()
		run := runToEnd(t, k.Kernel, rec, s.ID, "one two three")
		deadline := time.Now().Add(waitTimeout)
		for k.Stats().Leases > 0 {
			require.False(t, time.Now().After(deadline), "the session is still held after its run")
			time.Sleep(time.Millisecond)
		}
		assert.Equal(t, session.RunSucceeded, run.State)
		assert.Equal(t, int64(i+1), cs.starts.Load(), "StartRun calls after run %d", i+1)
		assert.Equal(t, int64(1), cs.lists.Load()-lists, "ListRuns calls in run %d", i+1)
	}
	assert.Zero(t, cs.creates.Load(), "a run was created apart from its start")
}
