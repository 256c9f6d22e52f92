package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
	"github.com/kerneld/kerneld/internal/store/memory"
)

// errCrashed is what a crashed store answers every write with.
var errCrashed = errors.New("store crashed")

// crashingStore persists writes until the limit-th one, then none: what a
// process killed at that point leaves on disk. Reads keep working.
type crashingStore struct {
	kernel.Store
	limit  int64
	writes atomic.Int64
}

func (s *crashingStore) write() error {
	if s.writes.Add(1) > s.limit {
		return errCrashed
	}
	return nil
}

func (s *crashingStore) CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.CreateRun(ctx, r, c)
}

func (s *crashingStore) UpdateRun(ctx context.Context, r session.Run) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.UpdateRun(ctx, r)
}

func (s *crashingStore) UpdateSession(ctx context.Context, sess session.Session) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.UpdateSession(ctx, sess)
}

func (s *crashingStore) AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.AppendMessages(ctx, token, msgs...)
}

func (s *crashingStore) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.StartRun(ctx, token, st)
}

func (s *crashingStore) DeleteSession(ctx context.Context, id string) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.DeleteSession(ctx, id)
}

func (s *crashingStore) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.Store.AppendEvents(ctx, token, evs)
}

// TestKernel_Recover crashes a run at every write it makes (a run with a
// tool call, one with three parallel calls, one streaming text) and
// starts again on the data left behind: the run must be continued to its
// end with the scripted model's whole answer, its log a valid AG-UI
// stream with one RUN_STARTED and one end, the history a valid
// conversation with every tool call answered, the session free, and the
// next run must continue the seq.
func TestKernel_Recover(t *testing.T) {
	answers := map[string]string{"tooluser": "Done.", "clumsy": "Recovered.", "echo": "what time is it?"}
	for _, agent := range []string{"tooluser", "clumsy", "echo"} {
		t.Run(agent, func(t *testing.T) { testRecover(t, agent, answers[agent]) })
	}
}

func testRecover(t *testing.T, agent, answer string) {
	writes := countWrites(t, agent)
	var logs [][]session.Event
	defer func() { aguitest.VerifyLogs(t, logs) }() // one checker run for every crash point
	continued := 0
	defer func() { assert.Positive(t, continued, "no crash point left a run to continue") }()
	for limit := int64(1); limit <= writes; limit++ {
		t.Run(fmt.Sprintf("crash after write %d of %d", limit, writes), func(t *testing.T) {
			db := memory.New()
			s := crashAt(t, db, limit, agent)
			k, rec := newKernel(t, kerneltest.Options{Store: db})
			_, err := k.Recover(t.Context())
			require.NoError(t, err)

			runs, err := k.ListRuns(t.Context(), s.ID, kernel.PageRequest{})
			require.NoError(t, err)
			require.LessOrEqual(t, len(runs.Items), 1)
			if len(runs.Items) == 1 {
				continued += checkContinued(t, k.Kernel, s.ID, runs.Items[0].ID, answer).Resumes
			}
			next := runToEnd(t, k.Kernel, rec, s.ID, "again")
			assert.Equal(t, session.RunSucceeded, next.State)
			evs := logOf(t, k.Kernel, s.ID)
			checkLog(t, s.ID, evs)
			logs = append(logs, evs)
			checkHistory(t, historyOf(t, k.Kernel, s.ID))
		})
	}
}

// checkContinued waits for run runID, which a crash left, to end, and
// checks that it succeeded with answer as its last message, resumed at
// most once as its record says, its session free and its log valid.
func checkContinued(t *testing.T, k *kernel.Kernel, sessionID, runID, answer string) session.Run {
	t.Helper()
	run := awaitEnd(t, k, sessionID, runID)
	s, err := k.GetSession(t.Context(), sessionID)
	require.NoError(t, err)
	assert.Empty(t, s.ActiveRunID, "the session is free")
	assert.Equal(t, session.StateCompleted, s.State)
	require.Equal(t, session.RunSucceeded, run.State, "run error %v", run.Error)
	evs := logOf(t, k, sessionID)
	checkLog(t, sessionID, evs)
	mine := runEvents(evs, runID)
	resumed := 0
	for _, ev := range mine {
		if ev.Type == session.EventCustom && ev.Member("name") == session.CustomRunResumed {
			resumed++
		}
	}
	assert.LessOrEqual(t, resumed, 1)
	assert.Equal(t, resumed, run.Resumes, "the record counts the resumes the log shows")
	assert.Equal(t, run.EndSeq, mine[len(mine)-1].Seq, "the run's record names its end")
	var last session.Message
	for _, m := range historyOf(t, k, sessionID) {
		if m.RunID == runID && m.Role == session.RoleAssistant {
			last = m
		}
	}
	assert.Equal(t, answer, last.Content, "the run's answer")
	return run
}

// countWrites runs agent once without a crash and counts the store writes.
func countWrites(t *testing.T, agent string) int64 {
	cs := &crashingStore{Store: memory.New(), limit: 1 << 40}
	k, rec := newKernel(t, kerneltest.Options{Store: cs})
	s := mustSession(t, k.Kernel, agent)
	before := cs.writes.Load()
	runToEnd(t, k.Kernel, rec, s.ID, "what time is it?")
	return cs.writes.Load() - before
}

// crashAt runs agent on db until the limit-th write of the run, then lets
// nothing more reach db, and waits until the crashed kernel gave up.
func crashAt(t *testing.T, db kernel.Store, limit int64, agent string) session.Session {
	cs := &crashingStore{Store: db, limit: 1 << 40}
	k, _ := newKernel(t, kerneltest.Options{Store: cs})
	s := mustSession(t, k.Kernel, agent)
	cs.limit = cs.writes.Load() + limit
	if _, _, err := k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "what time is it?"}); err != nil {
		require.ErrorIs(t, err, errCrashed)
	}
	require.Eventually(t, func() bool { // crashed, or finished before the limit
		sess, err := db.GetSession(t.Context(), s.ID)
		return cs.writes.Load() > cs.limit || (err == nil && sess.ActiveRunID == "")
	}, waitTimeout, time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	require.NoError(t, k.Close(ctx)) // its runs stop once every write fails
	return s
}

// TestKernel_RecoverNothing: a clean store has nothing to recover, and runs
// that ended are left alone.
func TestKernel_RecoverNothing(t *testing.T) {
	db := memory.New()
	k, rec := newKernel(t, kerneltest.Options{Store: db})
	s := mustSession(t, k.Kernel, "echo")
	runToEnd(t, k.Kernel, rec, s.ID, "hi")
	before := logOf(t, k.Kernel, s.ID)
	n, err := k.Recover(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Len(t, logOf(t, k.Kernel, s.ID), len(before))
}

// TestKernel_RecoverFork crashes the writing of a fork at every write it
// makes and starts again on what is left: a fork's first run, which only
// writes the history the fork keeps, is ended, never continued into a
// model call, and every log stays valid.
func TestKernel_RecoverFork(t *testing.T) {
	writes := forkWrites(t)
	for limit := int64(1); limit <= writes; limit++ {
		t.Run(fmt.Sprintf("crash after write %d of %d", limit, writes), func(t *testing.T) {
			db := memory.New()
			cs := &crashingStore{Store: db, limit: 1 << 40}
			k1, rec := newKernel(t, kerneltest.Options{Store: cs})
			src := mustSession(t, k1.Kernel, "echo")
			runToEnd(t, k1.Kernel, rec, src.ID, "fork me")
			cs.limit = cs.writes.Load() + limit
			_, _ = k1.ForkSession(t.Context(), src.ID, kernel.ForkRequest{}) // fails once the store stops taking writes
			closeKernel(t, k1.Kernel)

			k2, _ := newKernel(t, kerneltest.Options{Store: db})
			_, err := k2.Recover(t.Context())
			require.NoError(t, err)
			forks, err := k2.ListSessions(t.Context(), kernel.ListSessions{ForkedFrom: src.ID})
			require.NoError(t, err)
			if limit < writes {
				require.Len(t, forks.Items, 1, "the crash left the fork behind")
			}
			for _, f := range forks.Items {
				for _, r := range allRuns(t, k2.Kernel, f.ID) {
					got := awaitEnd(t, k2.Kernel, f.ID, r.ID)
					assert.Zero(t, got.Resumes, "a fork's first run is not continued")
				}
				evs := logOf(t, k2.Kernel, f.ID)
				if len(evs) > 0 { // a crash before the first run was stored leaves none
					checkLog(t, f.ID, evs)
				}
				for _, ev := range evs {
					assert.NotEqual(t, "assistant", ev.Member("role"), "the fork's first run called the model")
				}
			}
		})
	}
}

// forkWrites counts the store writes of forking a session.
func forkWrites(t *testing.T) int64 {
	cs := &crashingStore{Store: memory.New(), limit: 1 << 40}
	k, rec := newKernel(t, kerneltest.Options{Store: cs})
	src := mustSession(t, k.Kernel, "echo")
	runToEnd(t, k.Kernel, rec, src.ID, "fork me")
	before := cs.writes.Load()
	_, err := k.ForkSession(t.Context(), src.ID, kernel.ForkRequest{})
	require.NoError(t, err)
	return cs.writes.Load() - before
}
