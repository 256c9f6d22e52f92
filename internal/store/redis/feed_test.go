package redis_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestStore_Feed(t *testing.T) {
	redistest.Require(t)
	storetest.RunFeed(t, func(t *testing.T) storetest.FeedStore { return openStore(t) })
}
