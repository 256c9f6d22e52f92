package memory_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestStore_Feed(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T) storetest.FeedStore { return memory.New() })
}
