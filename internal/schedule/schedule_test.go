package schedule_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/schedule/scheduletest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a store with one session, a clock and a runner.
type fixture struct {
	st     storetest.ScheduleStore
	sess   session.Session
	clock  *scheduletest.Clock
	runner *scheduletest.Runner
}

func newFixture(t *testing.T, st storetest.ScheduleStore) *fixture {
	t.Helper()
	f := &fixture{st: st, clock: scheduletest.NewClock(), runner: scheduletest.NewRunner()}
	f.sess = f.newSession(t, "acme")
	return f
}

func (f *fixture) newSession(t *testing.T, tenant string) session.Session {
	t.Helper()
	s := session.Session{ID: session.NewID(), Tenant: tenant, Agent: "helper", State: session.StateActive, CreatedAt: f.clock.Now()}
	s.RootID = s.ID
	require.NoError(t, f.st.CreateSession(t.Context(), s))
	return s
}

// service returns a Service of the fixture named holder.
func (f *fixture) service(t *testing.T, holder string, limits schedule.Limits) *schedule.Service {
	t.Helper()
	svc, err := schedule.New(schedule.Options{Store: f.st, Runner: f.runner, Holder: holder, Limits: limits,
		Now: f.clock.Now, ClaimTTL: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, svc.Close(context.Background())) })
	return svc
}

// stores runs fn against the memory and the SQLite store.
func stores(t *testing.T, fn func(t *testing.T, st storetest.ScheduleStore)) {
	t.Run("memory", func(t *testing.T) { fn(t, memory.New()) })
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), sqlite.Options{Path: t.TempDir() + "/kerneld.db"})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, st.Close()) })
		fn(t, st)
	})
}

func mustFire(t *testing.T, svc *schedule.Service) int {
	t.Helper()
	n, err := svc.FireDue(t.Context())
	require.NoError(t, err)
	return n
}

func TestService_Create(t *testing.T) {
	f := newFixture(t, memory.New())
	svc := f.service(t, "r1", schedule.Limits{MinEvery: time.Minute, MaxAhead: 48 * time.Hour, MaxInputBytes: 10})
	now := f.clock.Now()
	tests := []struct {
		name string
		spec schedule.Spec
		want map[string]string
	}{
		{"neither at nor every", schedule.Spec{Input: "hi"}, map[string]string{"at": "at or every is required"}},
		{"too far ahead", schedule.Spec{At: now.Add(49 * time.Hour), Input: "hi"}, map[string]string{"at": "is more than 48h0m0s ahead"}},
		{"too often", schedule.Spec{Every: time.Second, Input: "hi"}, map[string]string{"every": "must be at least 1m0s"}},
		{"too seldom", schedule.Spec{Every: 49 * time.Hour, Input: "hi"}, map[string]string{"every": "must be at most 48h0m0s"}},
		{"no input", schedule.Spec{Every: time.Hour}, map[string]string{"input": "required"}},
		{"too long an input", schedule.Spec{Every: time.Hour, Input: "0123456789x"}, map[string]string{"input": "longer than 10 bytes"}},
		{"an unknown policy", schedule.Spec{Every: time.Hour, Input: "hi", IfBusy: "steer"}, map[string]string{"if_busy": `must be "skip" or "queue"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Create(t.Context(), f.sess, tt.spec)
			ve, ok := errors.AsType[*errdefs.ValidationError](err)
			require.True(t, ok, "err = %v", err)
			assert.Equal(t, tt.want, ve.Problems)
		})
	}

	sch, err := svc.Create(t.Context(), f.sess, schedule.Spec{Every: time.Hour, Input: "hourly"})
	require.NoError(t, err)
	assert.Equal(t, now.Add(time.Hour), sch.NextAt, "every alone fires first an interval from now")
	assert.Equal(t, schedule.IfBusySkip, sch.IfBusy, "skip by default")
	assert.Equal(t, f.sess.Tenant, sch.Tenant)
	at := now.Add(90 * time.Minute)
	sch, err = svc.Create(t.Context(), f.sess, schedule.Spec{At: at, Every: 24 * time.Hour, Input: "daily", IfBusy: schedule.IfBusyQueue})
	require.NoError(t, err)
	assert.Equal(t, at, sch.NextAt, "at and every: first at, then every")
	got, err := svc.List(t.Context(), f.sess.ID)
	require.NoError(t, err)
	assert.Len(t, got, 2)

	closed := f.sess
	closed.State = session.StateClosed
	_, err = svc.Create(t.Context(), closed, schedule.Spec{Every: time.Hour, Input: "hi"})
	assert.Equal(t, "session_closed", string(errdefs.CodeOf(err)))
}

// TestService_FireOnce: a schedule with at alone fires once, with the
// request the kernel needs, and is gone afterwards.
func TestService_FireOnce(t *testing.T) {
	stores(t, func(t *testing.T, st storetest.ScheduleStore) {
		f := newFixture(t, st)
		svc := f.service(t, "r1", schedule.Limits{})
		at := f.clock.Now().Add(10 * time.Minute)
		sch, err := svc.Create(t.Context(), f.sess, schedule.Spec{At: at, Input: "Stand-up in 5 minutes"})
		require.NoError(t, err)

		assert.Zero(t, mustFire(t, svc), "not due yet")
		f.clock.Set(at)
		assert.Equal(t, 1, mustFire(t, svc))
		assert.Equal(t, []schedule.RunRequest{{Tenant: "acme", SessionID: f.sess.ID, Input: "Stand-up in 5 minutes",
			IfBusy: "reject", Source: session.RunSourceSchedule, IdempotencyKey: schedule.FiringKey(sch.ID, at)}}, f.runner.Requests())
		_, err = svc.Get(t.Context(), f.sess.ID, sch.ID)
		assert.Equal(t, "schedule_not_found", string(errdefs.CodeOf(err)))
		f.clock.Advance(time.Hour)
		assert.Zero(t, mustFire(t, svc))
		assert.Len(t, f.runner.Requests(), 1)
	})
}

// TestService_FireAfterDowntime: a recurring schedule that missed five
// ticks while nothing ran fires once, and then at its next tick ahead.
func TestService_FireAfterDowntime(t *testing.T) {
	stores(t, func(t *testing.T, st storetest.ScheduleStore) {
		f := newFixture(t, st)
		svc := f.service(t, "r1", schedule.Limits{})
		start := f.clock.Now()
		sch, err := svc.Create(t.Context(), f.sess, schedule.Spec{Every: time.Hour, Input: "hourly", IfBusy: schedule.IfBusyQueue})
		require.NoError(t, err)

		f.clock.Set(start.Add(5*time.Hour + 20*time.Minute)) // down since before the first tick
		assert.Equal(t, 1, mustFire(t, svc))
		assert.Zero(t, mustFire(t, svc), "the missed ticks are not made up")
		got, err := svc.Get(t.Context(), f.sess.ID, sch.ID)
		require.NoError(t, err)
		assert.Equal(t, start.Add(6*time.Hour), got.NextAt, "the next tick still ahead")
		assert.Equal(t, int64(1), got.Fired)
		require.NotNil(t, got.Last)
		assert.Equal(t, schedule.OutcomeQueued, got.Last.Outcome)
		assert.Equal(t, start.Add(time.Hour), got.Last.DueAt)
		assert.Equal(t, "queue", f.runner.Requests()[0].IfBusy)

		f.clock.Set(start.Add(6 * time.Hour))
		assert.Equal(t, 1, mustFire(t, svc))
		assert.Equal(t, 2, f.runner.Started())
	})
}

// TestService_ThreeReplicas: three replicas polling one store at once fire
// each due schedule exactly once.
func TestService_ThreeReplicas(t *testing.T) {
	stores(t, func(t *testing.T, st storetest.ScheduleStore) {
		f := newFixture(t, st)
		replicas := []*schedule.Service{
			f.service(t, "r1", schedule.Limits{}), f.service(t, "r2", schedule.Limits{}), f.service(t, "r3", schedule.Limits{}),
		}
		const n = 20
		for i := range n {
			s := f.newSession(t, "acme")
			_, err := replicas[i%3].Create(t.Context(), s, schedule.Spec{At: f.clock.Now().Add(time.Minute), Input: "go"})
			require.NoError(t, err)
		}
		f.clock.Advance(time.Minute)
		var wg sync.WaitGroup
		var total atomic.Int64
		for _, r := range replicas {
			wg.Go(func() {
				for range 3 {
					n, err := r.FireDue(t.Context())
					assert.NoError(t, err)
					total.Add(int64(n))
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(n), total.Load(), "firings")
		assert.Len(t, f.runner.Requests(), n, "runs posted")
		assert.Equal(t, n, f.runner.Started())
	})
}
