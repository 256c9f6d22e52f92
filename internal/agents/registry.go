package agents

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Registry is the set of agents kerneld can run, by name. Create one with
// Load or NewRegistry. It is safe for concurrent use: Reload builds a
// complete new set and swaps it in, so a reader sees either the old set or
// the new one, never a mix.
type Registry struct {
	dir       string // the directory Load read; "" for NewRegistry
	opts      Options
	reloading sync.Mutex // one Reload at a time, so an older read never replaces a newer one
	current   atomic.Pointer[set]
}

// set is one immutable generation of agents.
type set struct {
	byName map[string]Spec
	sorted []Spec
}

// Load reads every *.yaml and *.yml file in dir (dotfiles excluded, since
// editors leave lock files such as .#echo.yaml) and returns a registry of
// the agents they define. ${VAR} in a file is replaced from opts.Getenv
// before parsing. Decoding is strict: an unknown field is an error. Every
// error wraps errdefs.ErrInvalid and starts with the file and the field.
// A missing directory is an error; an empty one gives an empty registry.
func Load(dir string, opts Options) (*Registry, error) {
	s, err := loadDir(dir, opts)
	if err != nil {
		return nil, err
	}
	r := &Registry{dir: dir, opts: opts}
	r.current.Store(s)
	return r, nil
}

// NewRegistry returns a registry of specs, for tests and built-in agents.
// Zero fields take their defaults, and a spec without a Provider gets one
// from opts.Providers. Such a spec needs Model.Provider; one that brings
// its own Provider does not.
func NewRegistry(opts Options, specs ...Spec) (*Registry, error) {
	filled := make([]Spec, len(specs))
	for i, s := range specs {
		filled[i] = withDefaults(s)
	}
	s, err := newSet(filled, opts)
	if err != nil {
		return nil, err
	}
	r := &Registry{opts: opts}
	r.current.Store(s)
	return r, nil
}

// Get returns the named agent or an error wrapping errdefs.ErrNotFound.
func (r *Registry) Get(name string) (Spec, error) {
	s, ok := r.current.Load().byName[name]
	if !ok {
		return Spec{}, errdefs.New(errdefs.ErrNotFound, errdefs.CodeAgentNotFound, "agent %q not found", name)
	}
	return s, nil
}

// List returns every agent, sorted by name.
func (r *Registry) List() []Spec {
	return slices.Clone(r.current.Load().sorted)
}

// Reload re-reads the directory Load used and replaces the agents with what
// it finds. On any error the current agents stay, so a bad edit to one file
// cannot take every agent away from a running daemon. A registry built by
// NewRegistry has nothing to re-read; Reload leaves it unchanged.
func (r *Registry) Reload() error {
	if r.dir == "" {
		return nil
	}
	r.reloading.Lock()
	defer r.reloading.Unlock()
	s, err := loadDir(r.dir, r.opts)
	if err != nil {
		return err
	}
	r.current.Store(s)
	return nil
}

// loadDir reads, validates and builds every agent file in dir. It reports
// the first problem of every bad file, not just of the first one.
func loadDir(dir string, opts Options) (*set, error) {
	files, err := agentFiles(dir)
	if err != nil {
		return nil, err
	}
	specs := make([]Spec, 0, len(files))
	var errs []error
	for _, f := range files {
		s, err := loadFile(f, opts.getenv())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		specs = append(specs, s)
	}
	s, err := newSet(specs, opts)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	return s, nil
}

// agentFiles lists the agent files of dir in name order, which makes
// duplicate-name errors and load order deterministic.
func agentFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read agents dir: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		files = append(files, filepath.Join(dir, name))
	}
	return files, nil
}

// loadFile reads and decodes one agent file, expanding ${VAR} in its values.
func loadFile(path string, getenv func(string) string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read agent file: %w", err)
	}
	s, err := parse(data, getenv)
	if err != nil {
		return Spec{}, &sourceError{source: path, err: err}
	}
	s.File = path
	return s, nil
}

// newSet validates specs, builds their providers and indexes them.
func newSet(specs []Spec, opts Options) (*set, error) {
	s := &set{byName: make(map[string]Spec, len(specs)), sorted: make([]Spec, 0, len(specs))}
	var errs []error
	for _, spec := range specs {
		spec, err := prepare(spec, opts)
		if err == nil {
			err = s.add(spec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.checkChildAgents()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(s.sorted, func(a, b Spec) int { return cmp.Compare(a.Name, b.Name) })
	return s, nil
}

// checkChildAgents reports child_agents entries naming no loaded agent.
func (s *set) checkChildAgents() []error {
	var errs []error
	for _, spec := range s.sorted {
		for i, name := range spec.ChildAgents {
			if _, ok := s.byName[name]; !ok {
				errs = append(errs, &sourceError{source: source(spec),
					err: fieldError(fmt.Sprintf("child_agents[%d]", i), "unknown agent %q", name)})
			}
		}
	}
	return errs
}

// add indexes spec unless its name is taken.
func (s *set) add(spec Spec) error {
	prev, ok := s.byName[spec.Name]
	switch {
	case ok && prev.File != "":
		return &sourceError{source: source(spec), err: fmt.Errorf("name: agent %q already defined in %s", spec.Name, prev.File)}
	case ok:
		return &sourceError{source: source(spec), err: errors.New("name: defined twice")}
	}
	s.byName[spec.Name] = spec
	s.sorted = append(s.sorted, spec)
	return nil
}

// getenv returns the configured lookup, defaulting to the process
// environment.
func (o Options) getenv() func(string) string {
	if o.Getenv == nil {
		return os.Getenv
	}
	return o.Getenv
}
