package redis_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/schedule/scheduletest"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ schedule.Store = (*redis.Store)(nil)

func TestStore_Schedules(t *testing.T) {
	redistest.Require(t)
	storetest.RunSchedules(t, func(t *testing.T) storetest.ScheduleStore { return openStore(t) })
}

// TestSchedules_ThreeReplicas: three replicas, each with its own
// connections to one Redis, fire every due schedule exactly once, and a
// schedule whose ticks passed while none ran fires once.
func TestSchedules_ThreeReplicas(t *testing.T) {
	srv := redistest.Use(t)
	clock, runner := scheduletest.NewClock(), scheduletest.NewRunner()
	var replicas []*schedule.Service
	for i := range 3 {
		svc, err := schedule.New(schedule.Options{Store: mustOpen(t, srv), Runner: runner,
			Holder: fmt.Sprintf("replica-%d", i), Now: clock.Now})
		require.NoError(t, err)
		replicas = append(replicas, svc)
	}
	st := mustOpen(t, srv)
	const n = 12
	var hourly schedule.Schedule
	for i := range n {
		s := session.Session{ID: session.NewID(), Tenant: "acme", Agent: "helper", State: session.StateActive}
		s.RootID = s.ID
		require.NoError(t, st.CreateSession(t.Context(), s))
		spec := schedule.Spec{At: clock.Now().Add(time.Minute), Input: "go"}
		if i == 0 {
			spec = schedule.Spec{Every: time.Hour, Input: "hourly"}
		}
		sch, err := replicas[i%3].Create(t.Context(), s, spec)
		require.NoError(t, err)
		if i == 0 {
			hourly = sch
		}
	}
	clock.Advance(5*time.Hour + time.Minute) // every replica was down
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() {
			for range 3 {
				_, err := r.FireDue(t.Context())
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.Len(t, runner.Requests(), n, "one run per schedule, the hourly one included once")
	assert.Equal(t, n, runner.Started())
	got, err := st.GetSchedule(t.Context(), hourly.SessionID, hourly.ID)
	require.NoError(t, err)
	assert.Equal(t, hourly.NextAt.Add(5*time.Hour), got.NextAt, "its next tick still ahead")
	remaining, err := st.ClaimDue(t.Context(), "check", clock.Now(), time.Minute, 100)
	require.NoError(t, err)
	assert.Empty(t, remaining, "nothing left due")
}
