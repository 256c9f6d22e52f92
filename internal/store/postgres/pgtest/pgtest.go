// Package pgtest gives tests a real PostgreSQL to use: the server
// KERNELD_TEST_POSTGRES_URL names (for example
// postgres://postgres@127.0.0.1:5432/postgres), with a database or schema
// of each test's own, dropped when the test ends, so tests may run in
// parallel against one server without seeing each other.
//
// Without KERNELD_TEST_POSTGRES_URL the tests that need Postgres skip and
// say why, unless KERNELD_REQUIRE_POSTGRES=1, which CI sets: then they
// fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The environment variables the package reads.
const (
	EnvURL     = "KERNELD_TEST_POSTGRES_URL"
	EnvRequire = "KERNELD_REQUIRE_POSTGRES"
)

// schemaDB is the database that Schema's schemas are made in.
const schemaDB = "kerneld_test"

// Require returns the URL of the server tests use. Without one it skips
// tb, or fails it under KERNELD_REQUIRE_POSTGRES=1. Tests made of many
// subtests call it first, to skip once.
func Require(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("%s is not set (%s=1 requires the Postgres tests)", EnvURL, EnvRequire)
		}
		tb.Skipf("skip: needs PostgreSQL; set %s (e.g. postgres://postgres@127.0.0.1:5432/postgres) to run, %s=1 to fail instead",
			EnvURL, EnvRequire)
	}
	return u
}

// Database creates a database of tb's own, dropped when tb ends, and
// returns its URL.
func Database(tb testing.TB) string {
	tb.Helper()
	base := Require(tb)
	name := "kerneld_test_" + randomHex()
	admin(tb, base, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	tb.Cleanup(func() {
		admin(tb, base, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
	})
	return withDatabase(tb, base, name)
}

// Schema creates a schema of tb's own in a database shared by tests,
// dropped with everything in it when tb ends, and returns a URL whose
// search_path names it. It is much cheaper than Database, for suites
// that open many stores.
func Schema(tb testing.TB) string {
	tb.Helper()
	base := Require(tb)
	ensureDatabase(tb, base, schemaDB)
	u := withDatabase(tb, base, schemaDB)
	name := "t_" + randomHex()
	admin(tb, u, `CREATE SCHEMA `+name)
	tb.Cleanup(func() { admin(tb, u, `DROP SCHEMA IF EXISTS `+name+` CASCADE`) })
	return withParam(tb, u, "search_path", name)
}

// ensureDatabase creates database name unless it exists; tests of several
// packages may race to create it.
func ensureDatabase(tb testing.TB, base, name string) {
	tb.Helper()
	err := exec(base, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	if err != nil && !alreadyExists(err) {
		tb.Fatalf("create database %s: %v", name, err)
	}
}

// alreadyExists reports whether err is CREATE DATABASE finding the name
// taken, by an earlier run or, at once, by another package's tests.
func alreadyExists(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "42P04" || pe.Code == "23505")
}

// admin runs sql on the server at u, failing tb if it fails.
func admin(tb testing.TB, u, sql string) {
	tb.Helper()
	if err := exec(u, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// exec runs sql on a connection of its own to u.
func exec(u, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns base naming database name instead.
func withDatabase(tb testing.TB, base, name string) string {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// withParam returns u with query parameter key set to value.
func withParam(tb testing.TB, u, key, value string) string {
	tb.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		tb.Fatalf("%s: %v", EnvURL, err)
	}
	q := parsed.Query()
	q.Set(key, value)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
