package kernel_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// sharedStores opens one store of each backend for replicas to share; Redis
// only when the tests have a server (see redistest).
func sharedStores(t *testing.T) map[string]func(*testing.T) kernel.Store {
	return map[string]func(*testing.T) kernel.Store{
		"memory": func(*testing.T) kernel.Store { return memory.New() },
		"sqlite": func(t *testing.T) kernel.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "k.db")})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		"redis": func(t *testing.T) kernel.Store {
			srv := redistest.Use(t)
			st, err := redis.Open(t.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// Two replicas creating one client id at once make one session; another
// tenant's identical id is another session.
func TestEnsureSession_ReplicasCreateOneSession(t *testing.T) {
	for name, open := range sharedStores(t) {
		t.Run(name, func(t *testing.T) {
			rs := replicasOn(t, open(t), 2, 2*time.Second)
			acme := kernel.WithTenant(t.Context(), "acme")
			var mu sync.Mutex
			var wg sync.WaitGroup
			ids, created := map[string]bool{}, 0
			for i := range 6 {
				wg.Go(func() {
					s, fresh, err := rs[i%2].EnsureSession(acme, kernel.CreateSession{Agent: "echo", ID: "thread-1"})
					assert.NoError(t, err)
					mu.Lock()
					defer mu.Unlock()
					ids[s.ID] = true
					if fresh {
						created++
					}
				})
			}
			wg.Wait()
			assert.Equal(t, 1, created)
			assert.Len(t, ids, 1)

			other := kernel.WithTenant(t.Context(), "other")
			s, fresh, err := rs[1].EnsureSession(other, kernel.CreateSession{Agent: "tooluser", ID: "thread-1"})
			require.NoError(t, err)
			assert.True(t, fresh)
			assert.Equal(t, "thread-1", session.PublicID(s.ID))
			got, err := rs[0].GetSession(acme, "thread-1")
			require.NoError(t, err)
			assert.Equal(t, "echo", got.Agent)
			_, _, err = rs[0].EnsureSession(acme, kernel.CreateSession{Agent: "tooluser", ID: "thread-1"})
			assert.Equal(t, "session_exists", string(errdefs.CodeOf(err)))

			// Runs, events and messages of a client id work on every store.
			run, _, err := rs[1].Run(acme, "thread-1", kernel.RunRequest{Input: "hi", ID: "run-1"})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				got, err := rs[0].GetRun(acme, "thread-1", run.ID)
				return err == nil && got.State.Terminal()
			}, 10*time.Second, 5*time.Millisecond)
			msgs, err := rs[0].Messages(acme, "thread-1", kernel.PageRequest{})
			require.NoError(t, err)
			assert.Len(t, msgs.Items, 2)
			evs, err := rs[0].Events(acme, "thread-1", 0, 0)
			require.NoError(t, err)
			require.NotEmpty(t, evs)
			assert.Contains(t, string(evs[0].Data), `"threadId":"thread-1","runId":"run-1"`)
			_, err = rs[0].Messages(other, "thread-1", kernel.PageRequest{})
			assert.NoError(t, err, "tenant other has its own thread-1")
			_, err = rs[0].GetRun(other, "thread-1", run.ID)
			assert.Equal(t, "run_not_found", string(errdefs.CodeOf(err)), "tenant other does not see acme's run")
		})
	}
}
