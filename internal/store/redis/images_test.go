package redis_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ images.Store = (*redis.Store)(nil)

func TestStore_Images(t *testing.T) {
	redistest.Require(t)
	storetest.RunImages(t, func(t *testing.T) storetest.ImageStore { return openStore(t) })
}
