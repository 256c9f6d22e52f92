package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/tools"
)

// warnings counts the log records at warning level or above, by message.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.msgs = append(w.msgs, r.Message)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// ends signals each run's end on its session's channel.
type ends struct{ byID sync.Map }

func (e *ends) of(id string) chan struct{} {
	c, _ := e.byID.LoadOrStore(id, make(chan struct{}, 1))
	return c.(chan struct{})
}

func (e *ends) ObserveEvents(evs []session.Event) {
	if last := evs[len(evs)-1]; last.Type.Ends() {
		e.of(last.SessionID) <- struct{}{}
	}
}
func (*ends) ObserveSessionEnded(string, int64) {}

// releases wraps the store to record the leases it released, and the
// renewals it then refused for one of them.
type releases struct {
	*redis.Store
	mu       sync.Mutex
	released map[string]bool // session id and token
	stale    int             // renewals refused for a lease released before
}

func (r *releases) ReleaseLease(ctx context.Context, id string, token int64) error {
	r.mu.Lock()
	r.released[id+" "+strconv.FormatInt(token, 10)] = true
	r.mu.Unlock()
	return r.Store.ReleaseLease(ctx, id, token)
}

func (r *releases) RenewLease(ctx context.Context, id string, token int64, ttl time.Duration) error {
	err := r.Store.RenewLease(ctx, id, token, ttl)
	r.mu.Lock()
	if errors.Is(err, session.ErrFenced) && r.released[id+" "+strconv.FormatInt(token, 10)] {
		r.stale++
	}
	r.mu.Unlock()
	return err
}

// Short runs, one after another on many sessions, while the kernel renews
// its leases a third of a TTL apart (a TTL of 1 s): a run's end releases
// its session's lease, the next run takes it anew, and no lease may be
// taken for lost meanwhile. Two races made W2 on Redis log dozens of
// "lease lost" warnings: a renewal pass renewed a snapshot of the
// sessions held when it began, so a lease released meanwhile was renewed
// with its old token and refused; and the pass renewed one lease after
// another, so on a busy store a pass over many sessions outlasted the TTL
// and leases expired between their renewals, stopping runs without
// writing as if another replica had taken their sessions (such a run
// never ends). The TTL is short enough for many renewal passes to meet
// releases, and long enough that a loaded machine running the race
// detector answers well within it.
func TestLeaseRenewalRacesRelease(t *testing.T) {
	srv := redistest.Use(t)
	st := &releases{Store: mustOpen(t, srv), released: make(map[string]bool)}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.yaml"), []byte(`name: echo
model:
  provider: scripted
  token_delay: 0s
  script:
    - text: "{input}"
`), 0o600))
	reg := tools.NewRegistry(tools.Builtins()...)
	agentReg, err := agents.Load(dir, agents.Options{Providers: map[string]llm.Factory{"scripted": scripted.New},
		KnownTool: reg.Has, Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	w := &warnings{}
	done := &ends{}
	k, err := kernel.New(kernel.Config{Agents: agentReg, Tools: reg, Store: st, Observers: []kernel.Observer{done},
		Logger: slog.New(w), Replication: kernel.Replication{Replica: "r1", LeaseTTL: time.Second}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, k.Close(ctx))
	})
	ctx := t.Context()
	const sessions, runs = 16, 40
	var wg sync.WaitGroup
	var failed atomic.Value
	for range sessions {
		s, err := k.CreateSession(ctx, kernel.CreateSession{Agent: "echo"})
		require.NoError(t, err)
		wg.Go(func() {
			for range runs {
				if _, _, err := k.Run(ctx, s.ID, kernel.RunRequest{Input: "one two three"}); err != nil {
					failed.Store(err)
					return
				}
				select {
				case <-done.of(s.ID):
				case <-time.After(30 * time.Second):
					failed.Store(errors.New("a run did not end"))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Fatalf("%v; warnings: %q", err, w.msgs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	var lost []string
	for _, m := range w.msgs {
		if strings.Contains(m, "lease") {
			lost = append(lost, m)
		}
	}
	require.Empty(t, lost, "warnings about leases after %d runs that all ended normally; "+
		"%d renewals were sent for a lease the kernel had released", sessions*runs, st.stale)
}
