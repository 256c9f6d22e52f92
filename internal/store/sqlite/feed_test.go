package sqlite_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

func TestStore_Feed(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T) storetest.FeedStore { return mustOpen(t, sqlite.Options{Path: tempPath(t)}) })
}
