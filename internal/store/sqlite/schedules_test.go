package sqlite_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ schedule.Store = (*sqlite.Store)(nil)

func TestStore_Schedules(t *testing.T) {
	storetest.RunSchedules(t, func(t *testing.T) storetest.ScheduleStore {
		return mustOpen(t, sqlite.Options{Path: tempPath(t)})
	})
}

// TestStore_DeleteSessionDeletesSchedules: here a session's schedules go
// with it, in the same transaction.
func TestStore_DeleteSessionDeletesSchedules(t *testing.T) {
	st := mustOpen(t, sqlite.Options{Path: tempPath(t)})
	s := mustCreateSession(t, st)
	now := time.Now().UTC().Truncate(time.Microsecond)
	sch := schedule.Schedule{ID: newID(), Tenant: s.Tenant, SessionID: s.ID, Input: "ping",
		IfBusy: schedule.IfBusySkip, NextAt: now, CreatedAt: now}
	require.NoError(t, st.CreateSchedule(t.Context(), sch, schedule.Bounds{}))
	require.NoError(t, st.DeleteSession(t.Context(), s.ID))
	got, err := st.ClaimDue(t.Context(), "r1", now, time.Minute, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
}
