package postgres_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestStore_Feed(t *testing.T) {
	pgtest.Require(t)
	storetest.RunFeed(t, func(t *testing.T) storetest.FeedStore { return openStore(t) })
}
