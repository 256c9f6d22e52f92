package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var _ kernel.Store = (*postgres.Store)(nil)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustOpen opens a store on url and closes it when tb ends.
func mustOpen(tb testing.TB, url string) *postgres.Store {
	tb.Helper()
	st, err := postgres.Open(tb.Context(), postgres.Options{URL: url})
	require.NoError(tb, err, "open postgres store")
	tb.Cleanup(func() { assert.NoError(tb, st.Close()) })
	return st
}

// openStore opens a store in a schema of tb's own.
func openStore(tb testing.TB) *postgres.Store {
	tb.Helper()
	return mustOpen(tb, pgtest.Schema(tb))
}

func TestStore(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, func(t *testing.T) kernel.Store { return openStore(t) })
}
