package kernel_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/kernel/kerneltest"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/session"
)

// burstModel streams n one-word tokens as fast as it can, calling
// before(i) ahead of token i.
type burstModel struct {
	n      int
	before func(i int)
}

func (m burstModel) Stream(ctx context.Context, _ llm.Request, emit func(llm.Chunk) error) error {
	for i := range m.n {
		if m.before != nil {
			m.before(i)
		}
		if err := emit(llm.Chunk{Text: "w "}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// burstKernel returns a kernel whose agent "burst" streams with m, and
// merges deltas when merge says so.
func burstKernel(t *testing.T, m burstModel, merge bool, opts kerneltest.Options) (*kerneltest.Kernel, *recorder) {
	t.Helper()
	stream := "stream: {merge_deltas: false}"
	if merge {
		stream = "stream: {merge_deltas: true}"
	}
	opts.Agents = []string{"name: burst\nmodel: {provider: burst}\n" + stream + "\n"}
	opts.Providers = map[string]llm.Factory{"burst": func(llm.ModelConfig) (llm.Provider, error) { return m, nil }}
	return newKernel(t, opts)
}

// firstDelta is an observer that closes seen when it is shown the first
// delta of a run's answer (the input's echo is not one).
type firstDelta struct {
	once sync.Once
	seen chan struct{}
}

func (f *firstDelta) ObserveEvents(evs []session.Event) {
	for _, ev := range evs {
		if ev.Type == session.EventTextMessageContent && strings.HasPrefix(ev.Member("delta"), "w") {
			f.once.Do(func() { close(f.seen) })
		}
	}
}

func (f *firstDelta) ObserveSessionEnded(string, int64) {}

// TestRun_FirstTokenBeforeHundredthEvent: a long answer's first token is
// with the observers (the SSE hub, which feeds the inline stream) before
// the model has produced its 100th token, on one CPU, where the model
// streaming at full speed would otherwise keep the writer from running
// until a whole batch queued up. How long the answer will be does not
// delay its first token.
func TestRun_FirstTokenBeforeHundredthEvent(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	obs := &firstDelta{seen: make(chan struct{})}
	var early atomic.Bool
	m := burstModel{n: 5000, before: func(i int) {
		if i != 99 {
			return
		}
		select {
		case <-obs.seen:
			early.Store(true)
		default:
		}
	}}
	k, rec := burstKernel(t, m, true, kerneltest.Options{Observers: []kernel.Observer{obs}})
	s := mustSession(t, k.Kernel, "burst")
	run := mustRun(t, k.Kernel, s.ID, "go")
	waitRun(t, k.Kernel, rec, s.ID, run.ID)
	if !early.Load() {
		t.Fatal("the first token reached the observers only after the model produced its 100th")
	}
}

// TestRun_MergedReplayEqualsLive: a run streaming faster than its store
// commits logs fewer delta events than tokens, and what the observers saw
// live is, byte for byte, what a client replaying the log reads, with the
// whole answer's text, in a log that keeps kerneld's stream rules.
func TestRun_MergedReplayEqualsLive(t *testing.T) {
	for _, store := range []string{"memory", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			const n = 5000
			opts := kerneltest.Options{}
			if store == "sqlite" {
				opts.Store = openSQLite(t)
			}
			k, rec := burstKernel(t, burstModel{n: n}, true, opts)
			s := mustSession(t, k.Kernel, "burst")
			run := runToEnd(t, k.Kernel, rec, s.ID, "go")
			replay := logOf(t, k.Kernel, s.ID)
			checkLog(t, s.ID, replay)
			live := rec.Events(s.ID)
			require.Len(t, live, len(replay))
			var text strings.Builder
			deltas := 0
			for i := range replay {
				require.Equal(t, string(replay[i].AppendJSON(nil)), string(live[i].AppendJSON(nil)), "event %d", i)
				if replay[i].Type == session.EventTextMessageContent && replay[i].RunID == run.ID {
					text.WriteString(replay[i].Member("delta"))
					deltas++
				}
			}
			assert.Equal(t, "go"+strings.Repeat("w ", n), text.String(), "the input's echo, then the answer")
			assert.Less(t, deltas, n/2, "deltas were merged")
		})
	}
}
