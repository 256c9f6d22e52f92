package memory_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ kernel.Store = (*memory.Store)(nil)

// openStore returns an empty store closed when tb ends.
func openStore(tb testing.TB) kernel.Store {
	st := memory.New()
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Error(err)
		}
	})
	return st
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) kernel.Store { return openStore(t) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) kernel.Store { return openStore(b) })
}
