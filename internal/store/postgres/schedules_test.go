package postgres_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestStore_Schedules(t *testing.T) {
	pgtest.Require(t)
	storetest.RunSchedules(t, func(t *testing.T) storetest.ScheduleStore { return openStore(t) })
}
