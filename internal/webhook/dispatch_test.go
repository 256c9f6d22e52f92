package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/webhooktest"
)

// fixture is a receiver, the targets that send to it and an outbox.
type fixture struct {
	rcv     *webhooktest.Receiver
	targets *webhook.Targets
	outbox  webhook.Outbox
}

func newFixture(t *testing.T, outbox webhook.Outbox) *fixture {
	t.Helper()
	secret := webhook.NewSecret()
	rcv := webhooktest.NewReceiver(t, secret)
	tg := mustTargets(t, webhook.TargetsConfig{Secret: secret, Routes: []webhook.Route{
		{Endpoint: webhook.Endpoint{URL: rcv.URL, Events: []string{"*"}}},
	}})
	return &fixture{rcv: rcv, targets: tg, outbox: outbox}
}

// dispatcher starts a dispatcher on the fixture's outbox, closed when the
// test ends.
func (f *fixture) dispatcher(t *testing.T, opts webhook.DispatcherOptions) *webhook.Dispatcher {
	t.Helper()
	opts.Outbox, opts.Keys = f.outbox, f.targets.Keys()
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = 20*time.Millisecond, 50*time.Millisecond
	}
	if opts.PollEvery == 0 {
		opts.PollEvery = 20 * time.Millisecond
	}
	d := webhook.NewDispatcher(opts)
	d.Start()
	t.Cleanup(func() { assert.NoError(t, d.Close(context.Background())) })
	return d
}

// announce enqueues the deliveries of n announcements and returns them.
func (f *fixture) announce(t *testing.T, d *webhook.Dispatcher, n int) []webhook.Delivery {
	t.Helper()
	var all []webhook.Delivery
	for i := range n {
		ds, err := f.targets.Deliveries(webhook.Announcement{Type: webhook.RunFinished, Key: fmt.Sprintf("run/%d/ended", i),
			Tenant: "acme", SessionID: "s1", RunID: fmt.Sprint(i), Time: time.Now()})
		require.NoError(t, err)
		all = append(all, ds...)
	}
	require.NoError(t, d.Enqueue(t.Context(), all...))
	return all
}

// waitState polls the outbox until the delivery is in state.
func waitState(t *testing.T, o webhook.Outbox, id string, state webhook.State) webhook.Delivery {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := o.GetDelivery(t.Context(), "acme", id)
		require.NoError(t, err)
		if d.State == state {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s is %s after 15s (attempts %d, last error %q), want %s", id, d.State, d.Attempts, d.LastError, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDispatcher_Delivers(t *testing.T) {
	f := newFixture(t, memory.New())
	d := f.dispatcher(t, webhook.DispatcherOptions{PollEvery: time.Hour}) // Enqueue wakes it
	ds := f.announce(t, d, 3)
	for _, del := range ds {
		got := waitState(t, f.outbox, del.ID, webhook.StateDelivered)
		assert.Equal(t, 1, got.Attempts)
		assert.Equal(t, http.StatusNoContent, got.LastStatus)
	}
	got, bad := f.rcv.Counts()
	assert.Equal(t, map[string]int{ds[0].ID: 1, ds[1].ID: 1, ds[2].ID: 1}, got)
	assert.Zero(t, bad, "every signature verified")
	assert.Equal(t, int64(3), d.Stats().Delivered.Load())
}

func TestDispatcher_DeliversOnceTheReceiverIsBack(t *testing.T) {
	f := newFixture(t, memory.New())
	f.rcv.Stop() // down: connections are refused
	d := f.dispatcher(t, webhook.DispatcherOptions{})
	del := f.announce(t, d, 1)[0]
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := f.outbox.GetDelivery(t.Context(), "acme", del.ID)
		require.NoError(t, err)
		if got.Attempts >= 3 {
			assert.Equal(t, webhook.StatePending, got.State)
			assert.Contains(t, got.LastError, "connection refused")
			break
		}
		require.True(t, time.Now().Before(deadline), "no three attempts within 15s")
		time.Sleep(5 * time.Millisecond)
	}
	f.rcv.Start(t) // back up
	got := waitState(t, f.outbox, del.ID, webhook.StateDelivered)
	assert.Greater(t, got.Attempts, 3)
	counts, _ := f.rcv.Counts()
	assert.Equal(t, map[string]int{del.ID: 1}, counts)
}

func TestDispatcher_DeadLetterThenRedeliver(t *testing.T) {
	f := newFixture(t, memory.New())
	f.rcv.SetStatus(func() int { return http.StatusInternalServerError })
	d := f.dispatcher(t, webhook.DispatcherOptions{RetryFor: 300 * time.Millisecond})
	del := f.announce(t, d, 1)[0]
	failed := waitState(t, f.outbox, del.ID, webhook.StateFailed)
	assert.Greater(t, failed.Attempts, 1, "retried before giving up")
	assert.Equal(t, http.StatusInternalServerError, failed.LastStatus)
	assert.Equal(t, "the receiver answered 500 Internal Server Error", failed.LastError)
	dead, err := d.ListPage(t.Context(), "acme", webhook.StateFailed, "", 0)
	require.NoError(t, err)
	require.Len(t, dead.Items, 1)
	assert.Equal(t, del.ID, dead.Items[0].ID)

	f.rcv.SetStatus(nil) // fixed
	_, err = d.Redeliver(t.Context(), "acme", del.ID)
	require.NoError(t, err)
	got := waitState(t, f.outbox, del.ID, webhook.StateDelivered)
	assert.Equal(t, 1, got.Attempts, "a redelivery starts a fresh count")
	counts, _ := f.rcv.Counts()
	assert.Equal(t, map[string]int{del.ID: 1}, counts, "with the same webhook-id")
	assert.Equal(t, int64(1), d.Stats().Failed.Load())
}

// TestDispatcher_CloseMidAttempt closes a dispatcher while its receiver
// holds a request: the attempt does not count, the delivery is due again
// at once, and the next dispatcher delivers it.
func TestDispatcher_CloseMidAttempt(t *testing.T) {
	f := newFixture(t, memory.New())
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.rcv.SetStatus(func() int {
		once.Do(func() { close(arrived) })
		<-release
		return http.StatusNoContent
	})
	first := webhook.NewDispatcher(webhook.DispatcherOptions{Outbox: f.outbox, Keys: f.targets.Keys(), PollEvery: time.Hour})
	first.Start()
	del := f.announce(t, first, 1)[0]
	<-arrived
	require.NoError(t, first.Close(t.Context()))
	close(release)
	f.rcv.SetStatus(nil)
	got, err := f.outbox.GetDelivery(t.Context(), "acme", del.ID)
	require.NoError(t, err)
	assert.Equal(t, webhook.StatePending, got.State)
	assert.Zero(t, got.Attempts)

	f.dispatcher(t, webhook.DispatcherOptions{})
	waitState(t, f.outbox, del.ID, webhook.StateDelivered)
}

func TestDispatcher_UnknownKeyFails(t *testing.T) {
	f := newFixture(t, memory.New())
	d := f.dispatcher(t, webhook.DispatcherOptions{})
	del := f.announce(t, d, 1)[0]
	waitState(t, f.outbox, del.ID, webhook.StateDelivered)
	orphan := del
	orphan.ID, orphan.KeyID = "msg_orphan", "key_gone"
	require.NoError(t, d.Enqueue(t.Context(), orphan))
	got := waitState(t, f.outbox, "msg_orphan", webhook.StateFailed)
	assert.Equal(t, "its signing secret is no longer configured", got.LastError)
}

// TestDispatcher_ReferenceVerifier sends to a receiver that verifies with
// the Standard Webhooks reference library: kerneld's deliveries pass an
// existing verifier unchanged.
func TestDispatcher_ReferenceVerifier(t *testing.T) {
	secret := webhook.NewSecret()
	ref := webhooktest.StartReference(t, secret)
	tg := mustTargets(t, webhook.TargetsConfig{Secret: secret, Routes: []webhook.Route{
		{Endpoint: webhook.Endpoint{URL: ref.URL, Events: []string{"*"}}},
	}})
	f := &fixture{targets: tg, outbox: memory.New()}
	d := f.dispatcher(t, webhook.DispatcherOptions{})
	del := f.announce(t, d, 1)[0]
	assert.Equal(t, "verified "+del.ID+" run.finished", ref.Next(t, 15*time.Second))
	waitState(t, f.outbox, del.ID, webhook.StateDelivered)

	// A delivery signed with another secret is rejected by the same verifier.
	wrong := mustTargets(t, webhook.TargetsConfig{Secret: webhook.NewSecret(), Routes: []webhook.Route{
		{Endpoint: webhook.Endpoint{URL: ref.URL, Events: []string{"*"}}},
	}})
	forged, err := wrong.Deliveries(webhook.Announcement{Type: webhook.RunFailed, Key: "forged", Tenant: "acme", SessionID: "s", Time: time.Now()})
	require.NoError(t, err)
	g := &fixture{targets: wrong, outbox: memory.New()}
	dg := g.dispatcher(t, webhook.DispatcherOptions{RetryFor: time.Millisecond})
	require.NoError(t, dg.Enqueue(t.Context(), forged...))
	assert.Contains(t, ref.Next(t, 15*time.Second), "rejected")
	failed := waitState(t, g.outbox, forged[0].ID, webhook.StateFailed)
	assert.Equal(t, http.StatusUnauthorized, failed.LastStatus)
}
