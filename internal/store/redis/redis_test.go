package redis_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/store/storetest"
)

var (
	_ kernel.Store   = (*redis.Store)(nil)
	_ kernel.Signals = (*redis.Signals)(nil)
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustOpen opens a store on the test server under a prefix of tb's own and
// closes it when tb ends.
func mustOpen(tb testing.TB, srv redistest.Server) *redis.Store {
	tb.Helper()
	st, err := redis.Open(tb.Context(), redis.Options{URL: srv.URL, Prefix: srv.Prefix})
	require.NoError(tb, err, "open redis store")
	tb.Cleanup(func() { assert.NoError(tb, st.Close()) })
	return st
}

// openStore opens a store of its own for tb.
func openStore(tb testing.TB) *redis.Store {
	tb.Helper()
	return mustOpen(tb, redistest.Use(tb))
}

func TestStore(t *testing.T) {
	redistest.Require(t)
	storetest.Run(t, func(t *testing.T) kernel.Store { return openStore(t) })
}

func TestPersistenceWarning(t *testing.T) {
	srv := redistest.Use(t)
	st := mustOpen(t, srv)
	aof, err := srv.Client(t).ConfigGet(t.Context(), "appendonly").Result()
	require.NoError(t, err)
	warning := st.PersistenceWarning(t.Context())
	if aof["appendonly"] == "no" {
		assert.Contains(t, warning, "appendonly no")
	} else {
		assert.NotContains(t, warning, "appendonly")
	}
}

// TestPersistenceWarningWithoutConfig connects as a user that may not run
// CONFIG, as on managed Redis services.
func TestPersistenceWarningWithoutConfig(t *testing.T) {
	srv := redistest.Use(t)
	admin := srv.Client(t)
	user := strings.ReplaceAll(strings.TrimSuffix(srv.Prefix, ":"), ":", "-")
	require.NoError(t, admin.Do(t.Context(), "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-config").Err())
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	u.User = url.UserPassword(user, "secret")

	st := mustOpen(t, redistest.Server{URL: u.String(), Prefix: srv.Prefix})
	warning := st.PersistenceWarning(t.Context())
	assert.Contains(t, warning, "could not check Redis persistence")
	assert.Contains(t, warning, "NOPERM")
}

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name string
		opts redis.Options
		want string
	}{
		{"malformed url", redis.Options{URL: "redis://kerneld:s3cret@localhost:notaport/0"}, "invalid_redis_url"},
		{"other scheme", redis.Options{URL: "http://localhost:6379"}, "invalid_redis_url"},
		{"hash tag in prefix", redis.Options{URL: "redis://localhost:6379/0", Prefix: "a{b}:"}, "invalid_redis_prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redis.Open(t.Context(), tt.opts)
			require.ErrorIs(t, err, errdefs.ErrInvalid)
			assert.Equal(t, tt.want, string(errdefs.CodeOf(err)))
			assert.NotContains(t, err.Error(), "s3cret", "the error shows the password")
		})
	}
}
