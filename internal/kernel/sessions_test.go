package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/session/aguitest"
)

const unknownID = "0190b1c4-7f3e-7cc0-8000-000000000000"

func TestKernel_CreateSession(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		ctx := kernel.WithTenant(t.Context(), "acme")
		s, err := k.CreateSession(ctx, kernel.CreateSession{
			Agent: "echo", Name: "chat", Metadata: map[string]string{"team": "blue"},
			Memory: map[string]json.RawMessage{"user": json.RawMessage(`{ "name" : "Ada" }`)},
		})
		require.NoError(t, err)
		assert.True(t, newStyleID(s.ID), "id %q", s.ID)
		assert.Equal(t, "echo", s.Agent)
		assert.Equal(t, "chat", s.Name)
		assert.Equal(t, map[string]string{"team": "blue"}, s.Metadata)
		assert.Equal(t, "acme", s.Tenant)
		assert.Equal(t, session.StateActive, s.State)
		assert.Equal(t, s.ID, s.RootID)
		assert.Empty(t, s.ParentID)
		assert.Zero(t, s.Depth)
		assert.Zero(t, s.LastSeq)
		assert.False(t, s.CreatedAt.IsZero())
		assert.Equal(t, time.UTC, s.CreatedAt.Location())

		got, err := k.GetSession(ctx, s.ID)
		require.NoError(t, err)
		assert.Equal(t, s, got)
		mem, err := k.GetMemory(ctx, s.ID, "user")
		require.NoError(t, err)
		assert.JSONEq(t, `{"name":"Ada"}`, string(mem.Value))
	})

	t.Run("invalid", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{Limits: kernel.Limits{
			MaxNameLength: 8, MaxMetadataKeys: 2, MaxMetadataKeyLen: 4, MaxMetadataValueLen: 4, MaxMemoryEntries: 1,
		}})
		tests := []struct {
			name  string
			req   kernel.CreateSession
			field string
		}{
			{"name too long", kernel.CreateSession{Agent: "echo", Name: "123456789"}, "name"},
			{"too many metadata keys", kernel.CreateSession{Agent: "echo", Metadata: map[string]string{"a": "", "b": "", "c": ""}}, "metadata"},
			{"empty metadata key", kernel.CreateSession{Agent: "echo", Metadata: map[string]string{"": "x"}}, "metadata"},
			{"metadata key too long", kernel.CreateSession{Agent: "echo", Metadata: map[string]string{"abcde": "x"}}, "metadata"},
			{"metadata value too long", kernel.CreateSession{Agent: "echo", Metadata: map[string]string{"a": "12345"}}, "metadata.a"},
			{"memory key", kernel.CreateSession{Agent: "echo", Memory: map[string]json.RawMessage{"bad key": json.RawMessage(`1`)}}, "memory.bad key"},
			{"memory value", kernel.CreateSession{Agent: "echo", Memory: map[string]json.RawMessage{"k": json.RawMessage(`{`)}}, "memory.k"},
			{"too many memory entries", kernel.CreateSession{Agent: "echo", Memory: map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`2`)}}, "memory"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := k.CreateSession(t.Context(), tt.req)
				ve, ok := errors.AsType[*errdefs.ValidationError](err)
				require.True(t, ok, "error %T %v", err, err)
				assert.Contains(t, ve.Problems, tt.field)
			})
		}
		page, err := k.ListSessions(t.Context(), kernel.ListSessions{})
		require.NoError(t, err)
		assert.Empty(t, page.Items, "an invalid request created a session")
	})

	t.Run("unknown agent", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "nobody"})
		requireCode(t, err, errdefs.ErrNotFound, "agent_not_found")
	})

	t.Run("children and grandchildren", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "parent")
		child := mustChild(t, k.Kernel, "parent", root.ID)
		assert.Equal(t, root.ID, child.ParentID)
		assert.Equal(t, root.ID, child.RootID)
		assert.Equal(t, 1, child.Depth)
		grandchild := mustChild(t, k.Kernel, "echo", child.ID)
		assert.Equal(t, child.ID, grandchild.ParentID)
		assert.Equal(t, root.ID, grandchild.RootID)
		assert.Equal(t, 2, grandchild.Depth)

		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: grandchild.ID})
		requireCode(t, err, errdefs.ErrConflict, "max_depth_exceeded")
		deepParent := mustChild(t, k.Kernel, "parent", child.ID)
		_, err = k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: deepParent.ID})
		requireCode(t, err, errdefs.ErrConflict, "max_depth_exceeded")
	})

	t.Run("default max_depth", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "echo")
		child := mustChild(t, k.Kernel, "echo", root.ID)
		assert.Equal(t, 1, child.Depth)
		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: child.ID})
		requireCode(t, err, errdefs.ErrConflict, "max_depth_exceeded")
	})

	t.Run("an ancestor's max_depth bounds its subtree", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "echo") // max_depth 1 by default
		child := mustChild(t, k.Kernel, "parent", root.ID)
		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: child.ID})
		requireCode(t, err, errdefs.ErrConflict, "max_depth_exceeded") // parent's own limit, 2, would allow it
		assert.Contains(t, err.Error(), `"echo"`, "the error names the agent whose limit applies")
	})

	t.Run("max_children", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "parent")
		first := mustChild(t, k.Kernel, "parent", root.ID)
		mustChild(t, k.Kernel, "echo", root.ID)
		mustChild(t, k.Kernel, "echo", first.ID) // a grandchild does not count against root

		_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: root.ID})
		requireCode(t, err, errdefs.ErrExhausted, "max_children_exceeded")

		_, err = k.CloseSession(t.Context(), first.ID)
		require.NoError(t, err)
		rec.WaitEnded(t, first.ID)
		third := mustChild(t, k.Kernel, "echo", root.ID)
		_, err = k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: root.ID})
		requireCode(t, err, errdefs.ErrExhausted, "max_children_exceeded")

		require.NoError(t, k.DeleteSession(t.Context(), third.ID, false))
		mustChild(t, k.Kernel, "echo", root.ID)
	})

	t.Run("concurrent children respect max_children", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		const rounds, n = 50, 16
		for round := range rounds {
			root := mustSession(t, k.Kernel, "parent")
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					_, errs[i] = k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: root.ID})
				})
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					require.Equal(t, "max_children_exceeded", string(errdefs.CodeOf(err)), "error %v", err)
				}
			}
			children, err := k.Children(t.Context(), root.ID, kernel.PageRequest{})
			require.NoError(t, err)
			require.Len(t, children.Items, 2, "round %d: %d children created at once under a parent allowing 2", round, len(children.Items))
		}
	})

	t.Run("bad parent", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		closed := mustSession(t, k.Kernel, "parent")
		_, err := k.CloseSession(t.Context(), closed.ID)
		require.NoError(t, err)
		theirs, err := k.CreateSession(kernel.WithTenant(t.Context(), "other"), kernel.CreateSession{Agent: "parent"})
		require.NoError(t, err)
		tests := []struct {
			name, parentID string
			kind           error
			code           string
		}{
			{"unknown", unknownID, errdefs.ErrNotFound, "parent_not_found"},
			{"malformed", "../etc", errdefs.ErrNotFound, "parent_not_found"},
			{"other tenant", theirs.ID, errdefs.ErrNotFound, "parent_not_found"},
			{"closed", closed.ID, errdefs.ErrConflict, "session_closed"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", ParentID: tt.parentID})
				requireCode(t, err, tt.kind, tt.code)
			})
		}
	})
}

// validUUID reports whether id is a canonical UUID string.
// newStyleID reports whether id has the form of the ids kerneld issues.
func newStyleID(id string) bool {
	return len(id) == session.IDLen && session.ValidID(id)
}

// waitState waits until session id is in state want.
func waitState(tb testing.TB, ctx context.Context, k *kernel.Kernel, id string, want session.State) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		s, err := k.GetSession(ctx, id)
		require.NoError(tb, err)
		if s.State == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("session %s is %s after %v, want %s", id, s.State, waitTimeout, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// mustChild creates a session of agent under parentID.
func mustChild(tb testing.TB, k *kernel.Kernel, agent, parentID string) session.Session {
	tb.Helper()
	s, err := k.CreateSession(tb.Context(), kernel.CreateSession{Agent: agent, ParentID: parentID})
	require.NoError(tb, err, "create %s child of %s", agent, parentID)
	return s
}

func TestKernel_GetSession(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	acme := kernel.WithTenant(t.Context(), "acme")
	s, err := k.CreateSession(acme, kernel.CreateSession{Agent: "echo"})
	require.NoError(t, err)

	t.Run("OK", func(t *testing.T) {
		got, err := k.GetSession(acme, s.ID)
		require.NoError(t, err)
		assert.Equal(t, s.ID, got.ID)
	})
	tests := []struct {
		name string
		ctx  context.Context
		id   string
	}{
		{"other tenant", kernel.WithTenant(t.Context(), "globex"), s.ID},
		{"no tenant", t.Context(), s.ID},
		{"unknown", acme, unknownID},
		{"empty", acme, ""},
		{"malformed", acme, "not-an-id"},
		{"upper case", acme, strings.ToUpper(s.ID)},
		{"braced", acme, "{" + s.ID + "}"},
		{"urn", acme, "urn:uuid:" + s.ID},
		{"cut short", acme, s.ID[:len(s.ID)-1]},
		{"path", acme, "../" + s.ID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := k.GetSession(tt.ctx, tt.id)
			requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		})
	}
}

func TestKernel_UpdateSession(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxNameLength: 8}})
	s, err := k.CreateSession(t.Context(), kernel.CreateSession{Agent: "echo", Name: "old", Metadata: map[string]string{"a": "1", "b": "2"}})
	require.NoError(t, err)
	ptr := func(s string) *string { return &s }

	t.Run("OK", func(t *testing.T) {
		got, err := k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{
			Name: ptr("new"), Metadata: map[string]*string{"a": nil, "c": ptr("3")},
		})
		require.NoError(t, err)
		assert.Equal(t, "new", got.Name)
		assert.Equal(t, map[string]string{"b": "2", "c": "3"}, got.Metadata)
		stored, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, got, stored)
	})
	t.Run("nothing to change", func(t *testing.T) {
		before, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		got, err := k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{})
		require.NoError(t, err)
		assert.Equal(t, before.Name, got.Name)
		assert.Equal(t, before.Metadata, got.Metadata)
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		_, err := k.UpdateSession(t.Context(), s.ID, kernel.SessionUpdate{Name: ptr("much too long")})
		require.ErrorIs(t, err, errdefs.ErrInvalid)
		got, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, "new", got.Name)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := k.UpdateSession(kernel.WithTenant(t.Context(), "other"), s.ID, kernel.SessionUpdate{Name: ptr("x")})
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})
}

func TestKernel_CloseSession(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		run := runToEnd(t, k.Kernel, rec, s.ID, "hello")

		got, err := k.CloseSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, session.StateClosed, got.State)
		assert.Equal(t, []int64{run.EndSeq}, rec.Ended(s.ID))

		_, _, err = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "more"})
		requireCode(t, err, errdefs.ErrConflict, "session_closed")
		_, err = k.PutMemory(t.Context(), s.ID, "k", json.RawMessage(`1`))
		requireCode(t, err, errdefs.ErrConflict, "session_closed")
		assert.Len(t, historyOf(t, k.Kernel, s.ID), 2, "the history stays readable")
		assert.Len(t, logOf(t, k.Kernel, s.ID), int(run.EndSeq))

		again, err := k.CloseSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, session.StateClosed, again.State)
	})

	t.Run("running", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		run := mustRun(t, k.Kernel, s.ID, "talk")
		rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)

		got, err := k.CloseSession(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, session.StateClosed, got.State)
		assert.Empty(t, got.ActiveRunID)

		evs := verifiedLog(t, k.Kernel, s.ID)
		end := cancelledEnd(t, evs, run.ID, "cancelled")
		assert.Equal(t, []int64{end.Seq}, rec.Ended(s.ID))
		assert.Equal(t, end.Seq, got.LastSeq)
		r, err := k.GetRun(t.Context(), s.ID, run.ID)
		require.NoError(t, err)
		assert.Equal(t, session.RunCancelled, r.State)
		checkHistory(t, historyOf(t, k.Kernel, s.ID))
	})

	t.Run("closes its subtree", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "parent")
		child := mustChild(t, k.Kernel, "parent", root.ID)
		grandchild := mustChild(t, k.Kernel, "slow", child.ID)
		run := mustRun(t, k.Kernel, grandchild.ID, "talk")
		rec.WaitEvents(t, grandchild.ID, run.ID, session.EventTextMessageContent, 2)

		_, err := k.CloseSession(t.Context(), root.ID)
		require.NoError(t, err)
		for _, id := range []string{root.ID, child.ID, grandchild.ID} {
			assert.Equal(t, session.StateClosed, mustGet(t, k.Kernel, id).State)
			assert.Len(t, rec.Ended(id), 1, "session %s was told it ended", id)
		}
		evs := logOf(t, k.Kernel, grandchild.ID)
		checkLog(t, grandchild.ID, evs)
		end := cancelledEnd(t, evs, run.ID, "cancelled")
		assert.Equal(t, []int64{end.Seq}, rec.Ended(grandchild.ID))
	})

	t.Run("parent mid-spawn", func(t *testing.T) {
		k, ids := testEndMidSpawn(t, func(k *kernel.Kernel, id string) error {
			_, err := k.CloseSession(t.Context(), id)
			return err
		})
		for _, id := range ids {
			assert.Equal(t, session.StateClosed, mustGet(t, k, id).State)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		_, err := k.CloseSession(kernel.WithTenant(t.Context(), "other"), s.ID)
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		_, err = k.CloseSession(t.Context(), "nope")
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})
}

func TestKernel_DeleteSession(t *testing.T) {
	t.Run("with children", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "parent")
		child := mustChild(t, k.Kernel, "parent", root.ID)
		grandchild := mustChild(t, k.Kernel, "echo", child.ID)
		sibling := mustChild(t, k.Kernel, "echo", root.ID)
		unrelated := mustSession(t, k.Kernel, "echo")

		err := k.DeleteSession(t.Context(), root.ID, false)
		requireCode(t, err, errdefs.ErrConflict, "session_has_children")
		e, _ := errors.AsType[*errdefs.Error](err)
		assert.Equal(t, 2, e.Extra["children"])
		err = k.DeleteSession(t.Context(), child.ID, false)
		requireCode(t, err, errdefs.ErrConflict, "session_has_children")
		for _, id := range []string{root.ID, child.ID, grandchild.ID, sibling.ID} {
			_, err := k.GetSession(t.Context(), id)
			require.NoError(t, err, "deleted without cascade")
		}

		require.NoError(t, k.DeleteSession(t.Context(), root.ID, true))
		for _, id := range []string{root.ID, child.ID, grandchild.ID, sibling.ID} {
			_, err := k.GetSession(t.Context(), id)
			requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
			assert.Len(t, rec.Ended(id), 1, "session %s", id)
		}
		_, err = k.GetSession(t.Context(), unrelated.ID)
		require.NoError(t, err)
		require.NoError(t, k.DeleteSession(t.Context(), unrelated.ID, false))
	})

	t.Run("while running", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "slow")
		run := mustRun(t, k.Kernel, s.ID, "talk")
		rec.WaitEvents(t, s.ID, run.ID, session.EventTextMessageContent, 2)

		require.NoError(t, k.DeleteSession(t.Context(), s.ID, false))
		observed := rec.Events(s.ID)
		checkLog(t, s.ID, observed)
		aguitest.Verify(t, observed)
		end := cancelledEnd(t, observed, run.ID, "cancelled")
		assert.Equal(t, []int64{end.Seq}, rec.Ended(s.ID), "ObserveSessionEnded gets the final seq")

		_, err := k.GetSession(t.Context(), s.ID)
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		_, err = k.Events(t.Context(), s.ID, 0, 10)
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		_, err = k.GetRun(t.Context(), s.ID, run.ID)
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		_, _, err = k.Run(t.Context(), s.ID, kernel.RunRequest{Input: "hi"})
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})

	t.Run("running child with cascade", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{})
		root := mustSession(t, k.Kernel, "parent")
		child := mustChild(t, k.Kernel, "slow", root.ID)
		run := mustRun(t, k.Kernel, child.ID, "talk")
		rec.WaitEvents(t, child.ID, run.ID, session.EventTextMessageContent, 2)

		require.NoError(t, k.DeleteSession(t.Context(), root.ID, true))
		end := cancelledEnd(t, rec.Events(child.ID), run.ID, "cancelled")
		assert.Equal(t, []int64{end.Seq}, rec.Ended(child.ID))
	})

	t.Run("parent mid-spawn with cascade", func(t *testing.T) {
		k, ids := testEndMidSpawn(t, func(k *kernel.Kernel, id string) error { return k.DeleteSession(t.Context(), id, true) })
		for _, id := range ids {
			_, err := k.GetSession(t.Context(), id)
			requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		for _, tt := range []struct {
			name string
			ctx  context.Context
			id   string
		}{
			{"other tenant", kernel.WithTenant(t.Context(), "other"), s.ID},
			{"malformed", t.Context(), "x"},
			{"unknown", t.Context(), unknownID},
		} {
			t.Run(tt.name, func(t *testing.T) {
				err := k.DeleteSession(tt.ctx, tt.id, true)
				requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
			})
		}
		_, err := k.GetSession(t.Context(), s.ID)
		require.NoError(t, err)
	})
}

func TestKernel_ListSessions(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	acme := kernel.WithTenant(t.Context(), "acme")
	globex := kernel.WithTenant(t.Context(), "globex")
	mk := func(ctx context.Context, agent, parent string) session.Session {
		t.Helper()
		s, err := k.CreateSession(ctx, kernel.CreateSession{Agent: agent, ParentID: parent})
		require.NoError(t, err)
		return s
	}
	echo := mk(acme, "echo", "")
	parent := mk(acme, "parent", "")
	child := mk(acme, "echo", parent.ID)
	theirs := mk(globex, "echo", "")
	run, _, err := k.Run(acme, echo.ID, kernel.RunRequest{Input: "hi"})
	require.NoError(t, err)
	rec.WaitRunEnd(t, echo.ID, run.ID)
	waitState(t, acme, k.Kernel, echo.ID, session.StateCompleted)

	ids := func(p kernel.Page[session.Session]) []string {
		out := make([]string, len(p.Items))
		for i, s := range p.Items {
			out[i] = s.ID
		}
		return out
	}
	tests := []struct {
		name string
		ctx  context.Context
		req  kernel.ListSessions
		want []string
	}{
		{"tenant", acme, kernel.ListSessions{}, []string{child.ID, parent.ID, echo.ID}},
		{"other tenant", globex, kernel.ListSessions{}, []string{theirs.ID}},
		{"unknown tenant", kernel.WithTenant(t.Context(), "initech"), kernel.ListSessions{}, []string{}},
		{"agent", acme, kernel.ListSessions{Agent: "echo"}, []string{child.ID, echo.ID}},
		{"state", acme, kernel.ListSessions{State: session.StateCompleted}, []string{echo.ID}},
		{"parent", acme, kernel.ListSessions{ParentID: parent.ID}, []string{child.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := k.ListSessions(tt.ctx, tt.req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, append([]string{}, ids(page)...))
			assert.Empty(t, page.Next)
		})
	}
	t.Run("unknown state", func(t *testing.T) {
		_, err := k.ListSessions(acme, kernel.ListSessions{State: "sleeping"})
		require.ErrorIs(t, err, errdefs.ErrInvalid)
	})
	t.Run("pages", testListSessionsPages)
	t.Run("children of another tenant's session", func(t *testing.T) {
		_, err := k.Children(globex, parent.ID, kernel.PageRequest{})
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})
}

// testEndMidSpawn ends, with end, a session whose run waits on a child it
// spawned. Both runs must end cancelled, never failed, and each session's
// observers must be told it ended after its run. It runs on SQLite, whose
// reads fail once a run's context is cancelled. It returns the kernel and
// the two sessions' ids.
func testEndMidSpawn(t *testing.T, end func(k *kernel.Kernel, id string) error) (*kernel.Kernel, []string) {
	k, rec := newKernel(t, kerneltest.Options{Store: mustSQLite(t), Agents: []string{
		kerneltest.Slow, spawner("boss", 5, 1, "slow", `{agent: slow, input: long}`),
	}})
	s := mustSession(t, k.Kernel, "boss")
	run := mustRun(t, k.Kernel, s.ID, "go")
	rec.WaitEvents(t, s.ID, run.ID, session.EventSubagentStarted, 1)
	childID := childOf(t, rec.Events(s.ID))
	childRun := startedOrder(t, rec.Events(childID))[0]

	require.NoError(t, end(k.Kernel, s.ID))
	for id, runID := range map[string]string{s.ID: run.ID, childID: childRun} {
		observed := rec.Events(id)
		checkLog(t, id, observed)
		last := cancelledEnd(t, observed, runID, "cancelled")
		ended := rec.Ended(id)
		require.NotEmpty(t, ended, "session %s was never told it ended", id)
		assert.Equal(t, last.Seq, ended[len(ended)-1], "session %s ends after its run", id)
	}
	return k.Kernel, []string{s.ID, childID}
}
