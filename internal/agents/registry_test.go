package agents_test

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// names returns the names of r's agents in List order.
func names(r *agents.Registry) []string {
	var out []string
	for _, s := range r.List() {
		out = append(out, s.Name)
	}
	return out
}

func TestRegistry_Get(t *testing.T) {
	r, err := agents.NewRegistry(testOptions(nil), agents.Spec{Name: "echo", Model: llm.ModelConfig{Provider: "fake"}})
	require.NoError(t, err)

	t.Run("OK", func(t *testing.T) {
		s, err := r.Get("echo")
		require.NoError(t, err)
		assert.Equal(t, "echo", s.Name)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := r.Get("nope")
		require.ErrorIs(t, err, errdefs.ErrNotFound)
		assert.EqualError(t, err, `agent "nope" not found`)
		assert.Equal(t, "agent_not_found", string(errdefs.CodeOf(err)))
	})
}

func TestNewRegistry(t *testing.T) {
	own := &fakeModel{}
	r, err := agents.NewRegistry(testOptions(nil),
		agents.Spec{Name: "built", Model: llm.ModelConfig{Provider: "fake", Name: "m"}},
		agents.Spec{Name: "own", Provider: own, Limits: agents.Limits{MaxChildren: 9}},
	)
	require.NoError(t, err)
	assert.Equal(t, []string{"built", "own"}, names(r))

	built, err := r.Get("built")
	require.NoError(t, err)
	require.IsType(t, &fakeModel{}, built.Provider, "a spec without a Provider gets one from its factory")
	assert.Equal(t, "m", built.Provider.(*fakeModel).cfg.Name)
	assert.Equal(t, 16, built.MaxTurns)
	assert.Equal(t, agents.Limits{MaxChildren: 5, MaxDepth: 1, RunTimeout: 10 * time.Minute}, built.Limits)
	assert.Equal(t, 200, built.Memory.MaxHistoryMessages)

	ownSpec, err := r.Get("own")
	require.NoError(t, err)
	assert.Same(t, own, ownSpec.Provider, "a spec's own Provider is kept")
	assert.Equal(t, 9, ownSpec.Limits.MaxChildren, "set fields are not defaulted")
}

func TestNewRegistry_Rejects(t *testing.T) {
	tests := []struct {
		name  string
		specs []agents.Spec
		want  string
	}{
		{"no name", []agents.Spec{{Provider: &fakeModel{}}}, `agent "": name: required`},
		{"no provider", []agents.Spec{{Name: "x"}}, `agent "x": model.provider: required`},
		{"unknown provider", []agents.Spec{{Name: "x", Model: llm.ModelConfig{Provider: "nope"}}},
			`agent "x": model.provider: unknown provider "nope" (known: fake, scripted)`},
		{"unknown tool", []agents.Spec{{Name: "x", Provider: &fakeModel{}, Tools: []agents.ToolRef{{Name: "rm"}}}},
			`agent "x": tools[0]: unknown tool "rm"`},
		{"negative limit", []agents.Spec{{Name: "x", Provider: &fakeModel{}, Limits: agents.Limits{MaxDepth: -1}}},
			`agent "x": limits.max_depth: must not be negative`},
		{"duplicate", []agents.Spec{{Name: "x", Provider: &fakeModel{}}, {Name: "x", Provider: &fakeModel{}}},
			`agent "x": name: defined twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agents.NewRegistry(testOptions(nil), tt.specs...)
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestRegistry_Reload(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{"a.yaml": "name: a\nmodel: {provider: fake}\n"})
	r, err := agents.Load(dir, testOptions(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, names(r))

	mustWrite(t, filepath.Join(dir, "b.yaml"), "name: b\nmodel: {provider: fake}\n")
	require.NoError(t, r.Reload())
	assert.Equal(t, []string{"a", "b"}, names(r), "a new file is picked up")

	mustWrite(t, filepath.Join(dir, "c.yaml"), "name: c\nmodel: {provider: nope}\n")
	err = r.Reload()
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	assert.Contains(t, err.Error(), filepath.Join(dir, "c.yaml"))
	assert.Equal(t, []string{"a", "b"}, names(r), "a bad file keeps the current set")

	require.NoError(t, os.Remove(filepath.Join(dir, "c.yaml")))
	require.NoError(t, os.Remove(filepath.Join(dir, "a.yaml")))
	require.NoError(t, r.Reload())
	assert.Equal(t, []string{"b"}, names(r), "a removed file's agent goes away")
	_, err = r.Get("a")
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

func TestRegistry_ReloadBuiltIn(t *testing.T) {
	r, err := agents.NewRegistry(testOptions(nil), agents.Spec{Name: "x", Provider: &fakeModel{}})
	require.NoError(t, err)
	require.NoError(t, r.Reload(), "a registry built in code has nothing to re-read")
	assert.Equal(t, []string{"x"}, names(r))
}

func TestRegistry_ReloadConcurrent(t *testing.T) {
	dir := mustWriteDir(t, map[string]string{"stable.yaml": "name: stable\nmodel: {provider: fake}\n"})
	r, err := agents.Load(dir, testOptions(nil))
	require.NoError(t, err)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := r.Get("stable")
				assert.NoError(t, err, "an agent present in every generation is always found")
				assert.Contains(t, names(r), "stable")
			}
		})
	}
	for i := range 20 {
		// Write and rename, as an operator's deploy should: a reader of a
		// half-written file would rightly fail the reload.
		tmp := filepath.Join(dir, ".extra.yaml.tmp")
		mustWrite(t, tmp, "name: extra"+strconv.Itoa(i)+"\nmodel: {provider: fake}\n")
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "extra.yaml")))
		wg.Go(func() { assert.NoError(t, r.Reload()) })
	}
	close(stop)
	wg.Wait()
}

func TestSpec_Tool(t *testing.T) {
	s := agents.Spec{Tools: []agents.ToolRef{{Name: "current_time"}, {Name: "memory_set", RequireApproval: true}}}
	ref, ok := s.Tool("memory_set")
	assert.True(t, ok)
	assert.Equal(t, agents.ToolRef{Name: "memory_set", RequireApproval: true}, ref)
	_, ok = s.Tool("memory_get")
	assert.False(t, ok, "a tool the agent does not list")
}
