package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/client"
	"github.com/kerneld/kerneld/internal/httpapi/httpapitest"
)

// TestClient_WatchSessions: the feed starts with a snapshot, then each
// change once and in order, across a connection cut mid-frame that the
// reader resumes with Last-Event-ID.
func TestClient_WatchSessions(t *testing.T) {
	cutter := &httpapitest.Cutter{AfterFrames: 3, Times: 1} // the retry line, the snapshot, one change, then the cut
	c, _ := newClient(t, httpapitest.Options{Feed: true, Wrap: cutter.Wrap})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	before, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo", Title: "before"})
	require.NoError(t, err)

	feed, err := c.WatchSessions(ctx, client.FeedOptions{Snapshot: true, RetryDelay: time.Millisecond})
	require.NoError(t, err)
	defer feed.Close()
	ev, err := feed.Next()
	require.NoError(t, err)
	require.Equal(t, client.FeedSnapshot, ev.Type)
	require.Len(t, ev.Sessions, 1)
	assert.Equal(t, before.ID, ev.Sessions[0].ID)
	assert.Equal(t, "before", ev.Sessions[0].Title)

	var want []string
	for _, title := range []string{"one", "two", "three"} {
		s, err := c.CreateSession(ctx, client.CreateSessionRequest{Agent: "echo", Title: title})
		require.NoError(t, err)
		want = append(want, s.ID)
	}
	var got []string
	last := ev.Seq
	for len(got) < len(want) {
		ev, err := feed.Next()
		require.NoError(t, err, "after %v", got)
		require.Greater(t, ev.Seq, last, "events in order, each once")
		last = ev.Seq
		if ev.Type == client.FeedSessionCreated && ev.Session.ID != before.ID {
			got = append(got, ev.Session.ID)
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 1, cutter.Cuts(), "the feed was cut once, and resumed")
	assert.Equal(t, last, feed.LastSeq())
}
