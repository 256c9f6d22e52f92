package kernel_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

// walk reads every page of a list, limit items at a time, and returns the
// ids in the order listed. It fails if a page is larger than limit or a
// page but the last is short.
func walk[T any](tb testing.TB, limit int, id func(T) string, list func(kernel.PageRequest) (kernel.Page[T], error)) []string {
	tb.Helper()
	var ids []string
	req := kernel.PageRequest{Limit: limit}
	for range 1000 {
		page, err := list(req)
		require.NoError(tb, err)
		require.LessOrEqual(tb, len(page.Items), limit)
		for _, it := range page.Items {
			ids = append(ids, id(it))
		}
		if page.Next == "" {
			return ids
		}
		require.Len(tb, page.Items, limit, "a page before the last is short")
		req.Cursor = page.Next
	}
	tb.Fatal("the pages never end")
	return nil
}

// badPages are page requests every list refuses with ErrInvalid.
var badPages = []struct {
	name string
	page kernel.PageRequest
}{
	{"limit 201", kernel.PageRequest{Limit: 201}},
	{"negative limit", kernel.PageRequest{Limit: -1}},
	{"cursor not base64", kernel.PageRequest{Cursor: "not a cursor!"}},
	{"cursor of another format", kernel.PageRequest{Cursor: base64.RawURLEncoding.EncodeToString([]byte("v9:whatever"))}},
	{"cursor with a bad id", kernel.PageRequest{Cursor: base64.RawURLEncoding.EncodeToString([]byte("k1:not-an-id"))}},
	{"cursor padded", kernel.PageRequest{Cursor: base64.URLEncoding.EncodeToString([]byte("k1:pos:1"))}},
}

// checkBadPages checks that list refuses every bad page request.
func checkBadPages[T any](t *testing.T, list func(kernel.PageRequest) (kernel.Page[T], error)) {
	t.Helper()
	for _, tt := range badPages {
		t.Run(tt.name, func(t *testing.T) {
			_, err := list(tt.page)
			require.ErrorIs(t, err, errdefs.ErrInvalid)
		})
	}
}

func sessionID(s session.Session) string { return s.ID }
func runID(r session.Run) string         { return r.ID }

// testListSessionsPages walks a tenant's sessions page by page.
func testListSessionsPages(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	ctx := kernel.WithTenant(t.Context(), "pages")
	const n = kernel.DefaultPageSize + 3
	var created []string
	for range n {
		s, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "echo"})
		require.NoError(t, err)
		created = append(created, s.ID)
	}
	mustSession(t, k.Kernel, "echo") // another tenant's
	newestFirst := slices.Clone(created)
	slices.Reverse(newestFirst)
	list := func(p kernel.PageRequest) (kernel.Page[session.Session], error) {
		return k.ListSessions(ctx, kernel.ListSessions{Page: p})
	}

	for _, limit := range []int{1, 7, n, kernel.MaxPageSize} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			assert.Equal(t, newestFirst, walk(t, limit, sessionID, list))
		})
	}
	t.Run("default limit", func(t *testing.T) {
		page, err := list(kernel.PageRequest{})
		require.NoError(t, err)
		assert.Len(t, page.Items, kernel.DefaultPageSize)
		assert.NotEmpty(t, page.Next)
	})
	checkBadPages(t, list)
}

func TestKernel_Children(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	root := mustSession(t, k.Kernel, "echo")
	var created []string
	for range 5 {
		created = append(created, mustChild(t, k.Kernel, "echo", root.ID).ID)
	}
	mustSession(t, k.Kernel, "echo") // not a child
	slices.Reverse(created)
	list := func(p kernel.PageRequest) (kernel.Page[session.Session], error) {
		return k.Children(t.Context(), root.ID, p)
	}
	assert.Equal(t, created, walk(t, 2, sessionID, list))
	checkBadPages(t, list)
	_, err := k.Children(t.Context(), unknownID, kernel.PageRequest{})
	requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
}

func TestKernel_ListRuns(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	const n = 7
	var created []string
	for i := range n {
		created = append(created, runToEnd(t, k.Kernel, rec, s.ID, fmt.Sprintf("run %d", i)).ID)
	}
	slices.Reverse(created)
	list := func(p kernel.PageRequest) (kernel.Page[session.Run], error) {
		return k.ListRuns(t.Context(), s.ID, p)
	}
	for _, limit := range []int{1, 3, n, kernel.MaxPageSize} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			assert.Equal(t, created, walk(t, limit, runID, list))
		})
	}
	t.Run("default limit", func(t *testing.T) {
		page, err := list(kernel.PageRequest{})
		require.NoError(t, err)
		assert.Len(t, page.Items, n)
		assert.Empty(t, page.Next)
		for _, r := range page.Items {
			assert.Equal(t, session.RunSucceeded, r.State)
		}
	})
	checkBadPages(t, list)
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := k.ListRuns(kernel.WithTenant(t.Context(), "other"), s.ID, kernel.PageRequest{})
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})
}

func TestKernel_Messages(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "tooluser")
	const runs = 3
	for i := range runs {
		runToEnd(t, k.Kernel, rec, s.ID, fmt.Sprintf("question %d", i))
	}
	all := historyOf(t, k.Kernel, s.ID)
	require.Len(t, all, 4*runs)
	var want []string
	for i, m := range all {
		assert.Equal(t, int64(i+1), m.Position)
		want = append(want, m.ID)
	}
	checkHistory(t, all)
	list := func(p kernel.PageRequest) (kernel.Page[session.Message], error) {
		return k.Messages(t.Context(), s.ID, p)
	}
	msgID := func(m session.Message) string { return m.ID }
	for _, limit := range []int{1, 5, 4 * runs, kernel.MaxPageSize} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			assert.Equal(t, want, walk(t, limit, msgID, list))
		})
	}
	t.Run("default limit", func(t *testing.T) {
		page, err := list(kernel.PageRequest{})
		require.NoError(t, err)
		assert.Len(t, page.Items, 4*runs)
	})
	checkBadPages(t, list)
	t.Run("session cursor", func(t *testing.T) {
		mustSession(t, k.Kernel, "echo")
		page, err := k.ListSessions(t.Context(), kernel.ListSessions{Page: kernel.PageRequest{Limit: 1}})
		require.NoError(t, err)
		require.NotEmpty(t, page.Next)
		_, err = list(kernel.PageRequest{Cursor: page.Next})
		require.ErrorIs(t, err, errdefs.ErrInvalid)
	})
}

func TestKernel_Events(t *testing.T) {
	k, rec := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "tooluser")
	run := runToEnd(t, k.Kernel, rec, s.ID, "what time is it")
	all := logOf(t, k.Kernel, s.ID)
	require.Len(t, all, int(run.EndSeq))

	tests := []struct {
		name      string
		after     int64
		limit     int
		wantFirst int64
		wantLen   int
	}{
		{"from the start", 0, 1000, 1, len(all)},
		{"after a seq", 3, 2, 4, 2},
		{"after the last", run.EndSeq, 10, 0, 0},
		{"limit above the maximum", 0, kernel.MaxEventPage + 1, 1, len(all)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := k.Events(t.Context(), s.ID, tt.after, tt.limit)
			require.NoError(t, err)
			require.Len(t, evs, tt.wantLen)
			for i, ev := range evs {
				assert.Equal(t, tt.wantFirst+int64(i), ev.Seq)
			}
		})
	}
	t.Run("negative after", func(t *testing.T) {
		_, err := k.Events(t.Context(), s.ID, -1, 10)
		require.ErrorIs(t, err, errdefs.ErrInvalid)
	})
	t.Run("other tenant", func(t *testing.T) {
		_, err := k.Events(kernel.WithTenant(t.Context(), "other"), s.ID, 0, 10)
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})
}
