package kernel_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/session"
)

// Memo sets memory through the memory_set tool, once with a bad key, then
// reads it back with memory_get.
const memo = `
name: memo
description: remembers things
model:
  provider: scripted
  script:
    - tool_calls:
        - {name: memory_set, arguments: {key: color, value: {name: blue}}}
        - {name: memory_set, arguments: {key: "bad key!", value: 1}}
    - {text: "Noted.", tool_calls: [{name: memory_get, arguments: {key: color}}]}
    - {text: "Done."}
tools: [memory_get, memory_set]
`

func TestKernel_PutMemory(t *testing.T) {
	t.Run("keys", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		tests := []struct {
			name, key string
			ok        bool
		}{
			{"letters", "color", true},
			{"every allowed character", "A-Z.a_z/0-9", true},
			{"128 characters", strings.Repeat("k", 128), true},
			{"empty", "", false},
			{"129 characters", strings.Repeat("k", 129), false},
			{"space", "a b", false},
			{"colon", "a:b", false},
			{"non-ASCII", "clé", false},
			{"newline", "a\n", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := k.PutMemory(t.Context(), s.ID, tt.key, json.RawMessage(`true`))
				if tt.ok {
					require.NoError(t, err)
					got, err := k.GetMemory(t.Context(), s.ID, tt.key)
					require.NoError(t, err)
					assert.Equal(t, "true", string(got.Value))
					return
				}
				ve, ok := errors.AsType[*errdefs.ValidationError](err)
				require.True(t, ok, "error %T %v", err, err)
				assert.Contains(t, ve.Problems, "key")
			})
		}
	})

	t.Run("values", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxMemoryValueBytes: 16}})
		s := mustSession(t, k.Kernel, "echo")
		tests := []struct {
			name, value, want string // want "" means ErrInvalid
		}{
			{"object, compacted", `{ "a" : [1, 2] }`, `{"a":[1,2]}`},
			{"string", `"hi"`, `"hi"`},
			{"null", `null`, `null`},
			{"exactly the limit", `"` + strings.Repeat("x", 14) + `"`, `"` + strings.Repeat("x", 14) + `"`},
			{"over the limit", `"` + strings.Repeat("x", 15) + `"`, ""},
			{"over the limit before compaction only", `[1,  2,  3,  4,  5]`, `[1,2,3,4,5]`},
			{"empty", ``, ""},
			{"not JSON", `{`, ""},
			{"two values", `1 2`, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e, err := k.PutMemory(t.Context(), s.ID, "k", json.RawMessage(tt.value))
				if tt.want == "" {
					ve, ok := errors.AsType[*errdefs.ValidationError](err)
					require.True(t, ok, "error %T %v", err, err)
					assert.Contains(t, ve.Problems, "value")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(e.Value))
				assert.Equal(t, s.ID, e.SessionID)
				assert.Equal(t, "k", e.Key)
				got, err := k.GetMemory(t.Context(), s.ID, "k")
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(got.Value))
			})
		}
	})

	t.Run("max entries", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{Limits: kernel.Limits{MaxMemoryEntries: 2}})
		s := mustSession(t, k.Kernel, "echo")
		put := func(key string) error {
			_, err := k.PutMemory(t.Context(), s.ID, key, json.RawMessage(`1`))
			return err
		}
		require.NoError(t, put("a"))
		require.NoError(t, put("b"))
		requireCode(t, put("c"), errdefs.ErrExhausted, "memory_full")
		require.NoError(t, put("a"), "replacing an entry needs no room")
		require.NoError(t, k.DeleteMemory(t.Context(), s.ID, "b"))
		require.NoError(t, put("c"))
		entries, err := k.ListMemory(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "c"}, keys(entries))
	})

	t.Run("closed session", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		_, err := k.PutMemory(t.Context(), s.ID, "k", json.RawMessage(`1`))
		require.NoError(t, err)
		_, err = k.CloseSession(t.Context(), s.ID)
		require.NoError(t, err)
		_, err = k.PutMemory(t.Context(), s.ID, "k", json.RawMessage(`2`))
		requireCode(t, err, errdefs.ErrConflict, "session_closed")
		got, err := k.GetMemory(t.Context(), s.ID, "k")
		require.NoError(t, err, "memory stays readable")
		assert.Equal(t, "1", string(got.Value))
	})

	t.Run("unknown session", func(t *testing.T) {
		k, _ := newKernel(t, kerneltest.Options{})
		s := mustSession(t, k.Kernel, "echo")
		_, err := k.PutMemory(kernel.WithTenant(t.Context(), "other"), s.ID, "k", json.RawMessage(`1`))
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
		_, err = k.PutMemory(t.Context(), unknownID, "k", json.RawMessage(`1`))
		requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
	})

	t.Run("injected into every model call", func(t *testing.T) {
		model := recordingModel(t,
			step{Text: "Saving.", ToolCalls: []scriptedCall{{Name: "memory_set", Arguments: map[string]any{"key": "mood", "value": "happy"}}}},
			step{Text: "Saved."},
		)
		k, rec, _ := newSpecKernel(t, kernel.Limits{}, agents.Spec{
			Name: "memo", SystemPrompt: "You are terse.", Provider: model, Tools: toolRefs("memory_set"),
		})
		s := mustSession(t, k, "memo")
		_, err := k.PutMemory(t.Context(), s.ID, "user.name", json.RawMessage(`"Ada"`))
		require.NoError(t, err)
		_, err = k.PutMemory(t.Context(), s.ID, "prefs/units", json.RawMessage(`{"temp": "C"}`))
		require.NoError(t, err)
		run := runToEnd(t, k, rec, s.ID, "remember my mood")
		require.Equal(t, session.RunSucceeded, run.State)

		reqs := model.Requests()
		require.Len(t, reqs, 2)
		for i, req := range reqs {
			assert.True(t, strings.HasPrefix(req.System, "You are terse."), "request %d system prompt %q", i, req.System)
			assert.Contains(t, req.System, `user.name: "Ada"`, "request %d", i)
			assert.Contains(t, req.System, `prefs/units: {"temp":"C"}`, "request %d", i)
		}
		assert.NotContains(t, reqs[0].System, "mood")
		assert.Contains(t, reqs[1].System, `mood: "happy"`, "memory set by a tool is seen by the next model call")
	})

	t.Run("no memory, no injection", func(t *testing.T) {
		model := recordingModel(t, step{Text: "Hi."})
		k, rec, _ := newSpecKernel(t, kernel.Limits{}, agents.Spec{Name: "plain", SystemPrompt: "Be nice.", Provider: model})
		s := mustSession(t, k, "plain")
		runToEnd(t, k, rec, s.ID, "hello")
		reqs := model.Requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, "Be nice.", reqs[0].System)
	})
}

// keys returns the keys of entries.
func keys(entries []session.MemoryEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Key
	}
	return out
}

func TestKernel_GetMemory(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	_, err := k.GetMemory(t.Context(), s.ID, "missing")
	requireCode(t, err, errdefs.ErrNotFound, "memory_key_not_found")
	_, err = k.GetMemory(kernel.WithTenant(t.Context(), "other"), s.ID, "missing")
	requireCode(t, err, errdefs.ErrNotFound, "session_not_found")
}

func TestKernel_DeleteMemory(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	_, err := k.PutMemory(t.Context(), s.ID, "k", json.RawMessage(`1`))
	require.NoError(t, err)
	require.NoError(t, k.DeleteMemory(t.Context(), s.ID, "k"))
	_, err = k.GetMemory(t.Context(), s.ID, "k")
	requireCode(t, err, errdefs.ErrNotFound, "memory_key_not_found")
	requireCode(t, k.DeleteMemory(t.Context(), s.ID, "k"), errdefs.ErrNotFound, "memory_key_not_found")
}

func TestKernel_ListMemory(t *testing.T) {
	k, _ := newKernel(t, kerneltest.Options{})
	s := mustSession(t, k.Kernel, "echo")
	entries, err := k.ListMemory(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Empty(t, entries)
	for _, key := range []string{"b", "a/z", "C", "a"} {
		_, err := k.PutMemory(t.Context(), s.ID, key, json.RawMessage(`0`))
		require.NoError(t, err)
	}
	entries, err = k.ListMemory(t.Context(), s.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"C", "a", "a/z", "b"}, keys(entries))
}

// TestKernel_MemoryTools runs an agent that uses memory_set and memory_get:
// what it sets is visible to GetMemory, and a bad call or a full memory
// goes back to the model as an error result without failing the run.
func TestKernel_MemoryTools(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{memo}})
		s := mustSession(t, k.Kernel, "memo")
		run := runToEnd(t, k.Kernel, rec, s.ID, "remember blue")
		assert.Equal(t, session.RunSucceeded, run.State)

		got, err := k.GetMemory(t.Context(), s.ID, "color")
		require.NoError(t, err)
		assert.JSONEq(t, `{"name":"blue"}`, string(got.Value))
		entries, err := k.ListMemory(t.Context(), s.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"color"}, keys(entries), "the bad key was not stored")

		evs := verifiedLog(t, k.Kernel, s.ID)
		var contents []string
		var errs int
		for _, ev := range evs {
			if ev.Type == session.EventToolCallResult {
				contents = append(contents, ev.Member("content"))
				if isErrorResult(t, ev) {
					errs++
					assert.Contains(t, ev.Member("content"), "key")
				}
			}
		}
		assert.Len(t, contents, 3)
		assert.Equal(t, 1, errs)
		assert.Contains(t, contents, `{"ok":true}`)
		assert.Contains(t, contents, `{"name":"blue"}`)
	})

	t.Run("memory full", func(t *testing.T) {
		k, rec := newKernel(t, kerneltest.Options{Agents: []string{memo}, Limits: kernel.Limits{MaxMemoryEntries: 1}})
		s := mustSession(t, k.Kernel, "memo")
		_, err := k.PutMemory(t.Context(), s.ID, "taken", json.RawMessage(`1`))
		require.NoError(t, err)
		run := runToEnd(t, k.Kernel, rec, s.ID, "remember blue")
		assert.Equal(t, session.RunSucceeded, run.State)
		_, err = k.GetMemory(t.Context(), s.ID, "color")
		requireCode(t, err, errdefs.ErrNotFound, "memory_key_not_found")
		var full bool
		for _, ev := range logOf(t, k.Kernel, s.ID) {
			if ev.Type == session.EventToolCallResult && strings.Contains(ev.Member("content"), "maximum of 1 entries") {
				full = isErrorResult(t, ev)
			}
		}
		assert.True(t, full, "no error result says the memory is full")
	})
}
