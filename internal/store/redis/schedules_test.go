package redis_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ schedule.Store = (*redis.Store)(nil)

func TestStore_Schedules(t *testing.T) {
	redistest.Require(t)
	storetest.RunSchedules(t, func(t *testing.T) storetest.ScheduleStore { return openStore(t) })
}
