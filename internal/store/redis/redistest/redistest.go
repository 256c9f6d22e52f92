// Package redistest gives tests a real Redis server to use: the one
// KERNELD_TEST_REDIS_URL names (for example redis://127.0.0.1:6379/9), with
// a key prefix of each test's own that is cleared when the test ends, so
// tests may run in parallel against one server without seeing each other.
//
// Without KERNELD_TEST_REDIS_URL the tests that need Redis skip and say
// why, unless KERNELD_REQUIRE_REDIS=1, which CI sets: then they fail.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The environment variables the package reads.
const (
	EnvURL     = "KERNELD_TEST_REDIS_URL"
	EnvRequire = "KERNELD_REQUIRE_REDIS"
)

// Server is the Redis server one test uses.
type Server struct {
	URL    string // from KERNELD_TEST_REDIS_URL
	Prefix string // starts every key the test may write; no other test uses it
}

// Use returns the server tb may use, with a fresh key prefix whose keys are
// deleted when tb ends. Without a server it skips tb, or fails it under
// KERNELD_REQUIRE_REDIS=1.
func Use(tb testing.TB) Server {
	tb.Helper()
	srv := Server{URL: Require(tb), Prefix: "kerneldtest:" + randomHex() + ":"}
	tb.Cleanup(func() {
		if err := DeleteKeys(srv.URL, srv.Prefix); err != nil {
			tb.Errorf("delete test keys %s*: %v", srv.Prefix, err)
		}
	})
	return srv
}

// Require returns the URL of the server tests use. Without one it skips
// tb, or fails it under KERNELD_REQUIRE_REDIS=1. Tests made of many
// subtests call it first, to skip once.
func Require(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("%s is not set (%s=1 requires the Redis tests)", EnvURL, EnvRequire)
		}
		tb.Skipf("skip: needs Redis; set %s (e.g. redis://127.0.0.1:6379/9) to run, %s=1 to fail instead", EnvURL, EnvRequire)
	}
	return url
}

// Client returns a client of the server, closed when tb ends, for tests
// that look at keys or act on connections behind a store's back.
func (srv Server) Client(tb testing.TB) *goredis.Client {
	tb.Helper()
	opts, err := goredis.ParseURL(srv.URL)
	if err != nil {
		tb.Fatalf("%s: %v", EnvURL, err)
	}
	c := goredis.NewClient(opts)
	tb.Cleanup(func() { _ = c.Close() }) // nothing to report once the test is over
	return c
}

// Keys returns the keys under the test's prefix.
func (srv Server) Keys(tb testing.TB) []string {
	tb.Helper()
	var keys []string
	err := scan(tb.Context(), srv.Client(tb), srv.Prefix, func(batch []string) error {
		keys = append(keys, batch...)
		return nil
	})
	if err != nil {
		tb.Fatalf("list keys %s*: %v", srv.Prefix, err)
	}
	return keys
}

// DeleteKeys deletes every key of the server at url that starts with
// prefix, which must hold no glob characters.
func DeleteKeys(url, prefix string) error {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return err
	}
	c := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = scan(ctx, c, prefix, func(keys []string) error { return c.Unlink(ctx, keys...).Err() })
	return errors.Join(err, c.Close())
}

// scan calls fn with every batch of keys starting with prefix.
func scan(ctx context.Context, c *goredis.Client, prefix string, fn func([]string) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
