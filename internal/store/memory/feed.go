package memory

import (
	"bytes"
	"context"
	"sync"

	"github.com/kerneld/kerneld/internal/session"
)

// feedTable holds the tenants' session feeds, under a lock of its own.
type feedTable struct {
	mu    sync.Mutex
	feeds map[string][]session.FeedEntry // by tenant, oldest first
	last  map[string]int64               // by tenant: the newest seq given
}

// AppendFeed appends e to its tenant's feed, assigning e.Seq, and drops
// the entries more than keep older than it (none when keep <= 0).
func (s *Store) AppendFeed(_ context.Context, e *session.FeedEntry, keep int) error {
	t := &s.feeds
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.feeds == nil {
		t.feeds, t.last = map[string][]session.FeedEntry{}, map[string]int64{}
	}
	t.last[e.Tenant]++
	e.Seq = t.last[e.Tenant]
	kept := *e
	kept.Data = bytes.Clone(e.Data)
	t.feeds[e.Tenant] = append(t.feeds[e.Tenant], kept)
	if feed := t.feeds[e.Tenant]; keep > 0 && len(feed) > keep {
		t.feeds[e.Tenant] = append([]session.FeedEntry(nil), feed[len(feed)-keep:]...)
	}
	return nil
}

// ReadFeed returns tenant's entries with seq > after, oldest first, at
// most limit of them (all when limit <= 0).
func (s *Store) ReadFeed(_ context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error) {
	t := &s.feeds
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []session.FeedEntry
	for _, e := range t.feeds[tenant] {
		if e.Seq <= after {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		e.Data = bytes.Clone(e.Data)
		out = append(out, e)
	}
	return out, nil
}

// FeedHead returns the newest seq of tenant's feed, 0 for none.
func (s *Store) FeedHead(_ context.Context, tenant string) (int64, error) {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	return s.feeds.last[tenant], nil
}
