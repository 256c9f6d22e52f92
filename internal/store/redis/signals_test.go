package redis_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// named returns srv with a URL that names every connection name, so a test
// can find them in CLIENT LIST.
func named(t *testing.T, srv redistest.Server, name string) redistest.Server {
	t.Helper()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("client_name", name)
	u.RawQuery = q.Encode()
	srv.URL = u.String()
	return srv
}

// clientIDs returns the ids of the connections named name whose CLIENT
// LIST flags hold flag: 'P' for a subscription, 'b' for a blocked read.
func clientIDs(ctx context.Context, admin *goredis.Client, name string, flag string) ([]string, error) {
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := make(map[string]string)
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		if fields["name"] == name && strings.Contains(fields["flags"], flag) {
			ids = append(ids, fields["id"])
		}
	}
	return ids, nil
}

// mustClientIDs is clientIDs for the test's own goroutine.
func mustClientIDs(t *testing.T, admin *goredis.Client, name string, flag string) []string {
	t.Helper()
	ids, err := clientIDs(t.Context(), admin, name, flag)
	require.NoError(t, err, "list clients")
	return ids
}

// killClients closes the connections ids from the server's side, as a
// network failure or a Redis restart would.
func killClients(t *testing.T, admin *goredis.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		n, err := strconv.ParseInt(id, 10, 64)
		require.NoError(t, err)
		require.NoError(t, admin.Do(t.Context(), "CLIENT", "KILL", "ID", n).Err(), "kill client %s", id)
	}
}

// receiver collects signals; its handler never blocks.
type receiver chan session.Signal

func (r receiver) handle(sig session.Signal) {
	select {
	case r <- sig:
	default:
	}
}

// next returns the next signal received, failing t after a while.
func (r receiver) next(t *testing.T) session.Signal {
	t.Helper()
	select {
	case sig := <-r:
		return sig
	case <-time.After(10 * time.Second):
		t.Fatal("no signal received")
		return session.Signal{}
	}
}

// runSignals runs g until the test ends, then closes it and checks that
// Run returned nil.
func runSignals(t *testing.T, g *redis.Signals) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	t.Cleanup(func() {
		assert.NoError(t, g.Close())
		assert.NoError(t, <-done, "Run")
	})
}

// waitSubscribers waits until n connections subscribe to the signals of
// the stores under srv's prefix.
func waitSubscribers(t *testing.T, srv redistest.Server, n int64) {
	t.Helper()
	c := srv.Client(t)
	channel := srv.Prefix + "signals"
	require.Eventually(t, func() bool {
		counts, err := c.PubSubNumSub(t.Context(), channel).Result()
		return err == nil && counts[channel] == n
	}, 10*time.Second, 5*time.Millisecond, "subscribers of %s", channel)
}

func TestSignalsReachEveryReplica(t *testing.T) {
	srv := redistest.Use(t)
	a, b := mustOpen(t, srv), mustOpen(t, srv)
	gotA, gotB := make(receiver, 16), make(receiver, 16)
	sigA, sigB := a.NewSignals(gotA.handle), b.NewSignals(gotB.handle)
	runSignals(t, sigA)
	runSignals(t, sigB)
	waitSubscribers(t, srv, 2)

	want := session.Signal{Kind: session.SignalEnded, SessionID: newID(), RunID: newID(), Seq: 42, From: "replica-a"}
	require.NoError(t, sigA.Publish(t.Context(), want))
	assert.Equal(t, want, gotB.next(t), "the other replica")
	assert.Equal(t, want, gotA.next(t), "the sender")
	bare := session.Signal{Kind: session.SignalChanged, SessionID: newID()}
	require.NoError(t, sigB.Publish(t.Context(), bare))
	assert.Equal(t, bare, gotA.next(t))
}

func TestSignalsResubscribe(t *testing.T) {
	srv := redistest.Use(t)
	name := strings.ReplaceAll(srv.Prefix, ":", "-") + "signals"
	st := mustOpen(t, named(t, srv, name))
	got := make(receiver, 16)
	g := st.NewSignals(got.handle)
	runSignals(t, g)
	waitSubscribers(t, srv, 1)
	admin := srv.Client(t)
	before := mustClientIDs(t, admin, name, "P")
	require.Len(t, before, 1, "subscribed connections")

	killClients(t, admin, before)
	// Signals published while the subscription is down are lost; keep
	// publishing until one arrives through the new one.
	var seq int64
	require.Eventually(t, func() bool {
		seq++
		if !assert.NoError(t, g.Publish(t.Context(), session.Signal{Kind: session.SignalChanged, Seq: seq})) {
			return false
		}
		select {
		case sig := <-got:
			return sig.Kind == session.SignalChanged
		default:
			return false
		}
	}, 10*time.Second, 20*time.Millisecond, "no signal after the connection was killed")
	after := mustClientIDs(t, admin, name, "P")
	require.Len(t, after, 1)
	assert.NotEqual(t, before, after, "a new connection subscribed")
}

func TestSignalsClose(t *testing.T) {
	st := openStore(t)
	g := st.NewSignals(func(session.Signal) {})
	require.NoError(t, g.Close())
	assert.Error(t, g.Run(t.Context()), "Run after Close")

	g = st.NewSignals(func(session.Signal) {})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	cancel()
	assert.NoError(t, <-done, "Run returns when its context ends")
	assert.NoError(t, g.Close())
}
