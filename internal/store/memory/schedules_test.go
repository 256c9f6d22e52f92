package memory_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ schedule.Store = (*memory.Store)(nil)

func TestStore_Schedules(t *testing.T) {
	storetest.RunSchedules(t, func(t *testing.T) storetest.ScheduleStore { return memory.New() })
}
