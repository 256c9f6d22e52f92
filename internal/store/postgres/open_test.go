package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/postgres"
	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
)

func TestOpenRejectsBadURL(t *testing.T) {
	_, err := postgres.Open(t.Context(), postgres.Options{URL: "postgres://kerneld:s3cret@localhost:notaport/db"})
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	assert.Equal(t, "invalid_postgres_url", string(errdefs.CodeOf(err)))
	assert.NotContains(t, err.Error(), "s3cret", "the error shows the password")
}

// TestOpenMigratesOnce opens two stores on one empty schema at once: the
// advisory lock has them apply the schema once, and both work.
func TestOpenMigratesOnce(t *testing.T) {
	u := pgtest.Schema(t)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 3)
	for i := range stores {
		wg.Go(func() { stores[i] = mustOpen(t, u) })
	}
	wg.Wait()
	var n int
	require.NoError(t, queryRow(t, u, `SELECT count(*) FROM kerneld_schema`, &n))
	assert.Equal(t, postgres.LatestVersion(), n)
	for _, st := range stores {
		require.NoError(t, st.Ping(t.Context()))
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	u := pgtest.Schema(t)
	require.NoError(t, mustOpen(t, u).Close())
	newer := postgres.LatestVersion() + 1
	exec(t, u, `INSERT INTO kerneld_schema (version, name) VALUES ($1, 'from the future')`, newer)
	_, err := postgres.Open(t.Context(), postgres.Options{URL: u})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "newer than this kerneld knows")
}

// TestReadOnlyIsUnavailable writes through connections that Postgres
// holds read-only, as on a standby: 503 storage_unavailable, not 500.
func TestReadOnlyIsUnavailable(t *testing.T) {
	u := pgtest.Schema(t)
	require.NoError(t, mustOpen(t, u).Close()) // migrate while writable
	ro := withParam(t, u, "default_transaction_read_only", "on")
	st := mustOpen(t, ro)
	err := st.CreateSession(t.Context(), newSession())
	requireStorageError(t, err, "read-only")
}

// TestUnreachableIsUnavailable cuts the store off from Postgres behind a
// proxy: Ping (so /readyz) and writes fail as storage unavailable, and
// both work again once Postgres answers.
func TestUnreachableIsUnavailable(t *testing.T) {
	u := pgtest.Schema(t)
	p := startProxy(t, u)
	st := mustOpen(t, p.url)
	require.NoError(t, st.Ping(t.Context()))

	p.cut()
	requireStorageError(t, st.Ping(t.Context()), "cannot be reached")
	requireStorageError(t, st.CreateSession(t.Context(), newSession()), "cannot be reached")

	p.restore(t)
	require.Eventually(t, func() bool { return st.Ping(t.Context()) == nil }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, st.CreateSession(t.Context(), newSession()))
}

func requireStorageError(t *testing.T, err error, reason string) {
	t.Helper()
	se, ok := errors.AsType[*errdefs.StorageError](err)
	require.True(t, ok, "want a *errdefs.StorageError, got %v", err)
	assert.Contains(t, se.Reason, reason)
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
}

func newSession() session.Session {
	id, now := session.NewMessageID(), time.Now().UTC().Truncate(time.Microsecond)
	return session.Session{ID: id, Tenant: "acme", Agent: "helper", State: session.StateActive,
		RootID: id, CreatedAt: now, UpdatedAt: now}
}

// proxy forwards TCP connections to Postgres until cut.
type proxy struct {
	url    string
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	wg     sync.WaitGroup
}

// startProxy listens on loopback for the server u names; it stops when t
// ends.
func startProxy(t *testing.T, u string) *proxy {
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	p := &proxy{target: parsed.Host}
	p.restore(t)
	p.addr = p.ln.Addr().String()
	parsed.Host = p.addr
	p.url = parsed.String()
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

// restore listens again (on the same address once cut).
func (p *proxy) restore(t *testing.T) {
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() { p.accept(ln) })
}

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
	}
}

// cut closes the listener and every connection through it.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func withParam(t *testing.T, u, key, value string) string {
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	q := parsed.Query()
	q.Set(key, value)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

func exec(t *testing.T, u, sql string, args ...any) {
	conn, err := pgx.Connect(t.Context(), u)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func queryRow(t *testing.T, u, sql string, dst ...any) error {
	conn, err := pgx.Connect(t.Context(), u)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	return conn.QueryRow(t.Context(), sql).Scan(dst...)
}
