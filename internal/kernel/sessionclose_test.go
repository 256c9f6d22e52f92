package kernel_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

func TestKernel_CloseSessionWithReason(t *testing.T) {
	onEveryStore(t, func(t *testing.T, k *kerneltest.Kernel, rec *recorder) {
		ctx := t.Context()
		s := mustSession(t, k.Kernel, "slow")
		runToEnd(t, k.Kernel, rec, s.ID, "first")
		child, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "slow", ParentID: s.ID})
		require.NoError(t, err)
		childRun := mustRun(t, k.Kernel, child.ID, "busy child")
		running := mustRun(t, k.Kernel, s.ID, "second")
		rec.WaitEvents(t, s.ID, running.ID, session.EventTextMessageContent, 2)

		closed, err := k.CloseSessionWithReason(ctx, s.ID, "done for today")
		require.NoError(t, err)
		assert.Equal(t, session.StateClosed, closed.State)
		assert.Equal(t, "done for today", closed.ClosedReason)
		assert.Empty(t, closed.ActiveRunID)

		t.Run("its runs are cancelled and its stream ends", func(t *testing.T) {
			run, err := k.GetRun(ctx, s.ID, running.ID)
			require.NoError(t, err)
			assert.Equal(t, session.RunCancelled, run.State)
			evs := verifiedLog(t, k.Kernel, s.ID)
			assert.Equal(t, evs[len(evs)-1].Seq, rec.WaitEnded(t, s.ID), "the stream ends after the final event")
			checkHistory(t, historyOf(t, k.Kernel, s.ID))
		})
		t.Run("its children are closed", func(t *testing.T) {
			got, err := k.GetSession(ctx, child.ID)
			require.NoError(t, err)
			assert.Equal(t, session.StateClosed, got.State)
			assert.Contains(t, got.ClosedReason, "was closed")
			run, err := k.GetRun(ctx, child.ID, childRun.ID)
			require.NoError(t, err)
			assert.True(t, run.State.Terminal(), "child run %s", run.State)
			rec.WaitEnded(t, child.ID)
		})
		t.Run("it refuses changes", func(t *testing.T) {
			_, err := k.UpdateSession(ctx, s.ID, kernel.SessionUpdate{Name: new("renamed")})
			requireCode(t, err, errdefs.ErrConflict, "session_closed")
			_, _, err = k.Run(ctx, s.ID, kernel.RunRequest{Input: "more"})
			requireCode(t, err, errdefs.ErrConflict, "session_closed")
			_, err = k.PutMemory(ctx, s.ID, "k", json.RawMessage(`1`))
			requireCode(t, err, errdefs.ErrConflict, "session_closed")
			err = k.DeleteMemory(ctx, s.ID, "k")
			requireCode(t, err, errdefs.ErrConflict, "session_closed")
		})
		t.Run("closing again changes nothing", func(t *testing.T) {
			again, err := k.CloseSessionWithReason(ctx, s.ID, "another reason")
			require.NoError(t, err)
			assert.Equal(t, "done for today", again.ClosedReason)
			assert.Equal(t, closed.Version, again.Version)
		})
		t.Run("it can be read, forked and deleted", func(t *testing.T) {
			got, err := k.GetSession(ctx, s.ID)
			require.NoError(t, err)
			assert.Equal(t, "done for today", got.ClosedReason)
			history := historyOf(t, k.Kernel, s.ID)
			f := fork(t, k.Kernel, s.ID, nil)
			assert.Equal(t, session.StateCompleted, f.State, "a fork of a closed session is open")
			assert.Len(t, historyOf(t, k.Kernel, f.ID), len(history))
			runToEnd(t, k.Kernel, rec, f.ID, "go on")
			require.NoError(t, k.DeleteSession(ctx, s.ID, true))
			_, err = k.GetSession(ctx, s.ID)
			requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
			_, err = k.GetSession(ctx, f.ID)
			require.NoError(t, err, "a fork outlives its source")
		})
		t.Run("refuses a reason too long", func(t *testing.T) {
			other := mustSession(t, k.Kernel, "echo")
			_, err := k.CloseSessionWithReason(ctx, other.ID, strings.Repeat("x", kernel.MaxClosedReasonLen+1))
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			got, err := k.GetSession(ctx, other.ID)
			require.NoError(t, err)
			assert.Equal(t, session.StateActive, got.State)
		})
	})
}
