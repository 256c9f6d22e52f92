package memory_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ images.Store = (*memory.Store)(nil)

func TestStore_Images(t *testing.T) {
	storetest.RunImages(t, func(t *testing.T) storetest.ImageStore { return memory.New() })
}
