package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
)

// The tenants' session feeds. Keys, after the prefix P:
//
//	P{feed:<t>}:log   stream: tenant t's entries, id <seq>-0, fields s
//	                  (session id), k (kind), t (time, micros), d (summary)
//	P{feed:<t>}:seq   string: the newest seq given out
//
// Every replica reads the same stream, so a subscriber on any replica
// sees the entries appended by any other.
var scriptFeedAppend = newScript("feed_append")

func (s *Store) feedKeys(tenant string) (log, seq string) {
	tag := s.prefix + "{feed:" + tenant + "}:"
	return tag + "log", tag + "seq"
}

// AppendFeed appends e to its tenant's feed, assigning e.Seq, and drops
// the entries about keep older than it (Redis trims approximately).
func (s *Store) AppendFeed(ctx context.Context, e *session.FeedEntry, keep int) error {
	log, seq := s.feedKeys(e.Tenant)
	n, err := scriptFeedAppend.Run(ctx, s.rdb, []string{log, seq}, max(keep, 0), e.SessionID, e.Kind, e.Time.UnixMicro(), e.Data).Int64()
	if err != nil {
		return fmt.Errorf("append feed: %w", err)
	}
	e.Seq = n
	return nil
}

// ReadFeed returns tenant's entries with seq > after, oldest first, at
// most limit of them (all when limit <= 0).
func (s *Store) ReadFeed(ctx context.Context, tenant string, after int64, limit int) ([]session.FeedEntry, error) {
	log, _ := s.feedKeys(tenant)
	start := strconv.FormatInt(after, 10) + "-1" // the first id past <after>-0
	var msgs []goredis.XMessage
	var err error
	if limit > 0 {
		msgs, err = s.rdb.XRangeN(ctx, log, start, "+", int64(limit)).Result()
	} else {
		msgs, err = s.rdb.XRange(ctx, log, start, "+").Result()
	}
	if err != nil {
		return nil, fmt.Errorf("read feed: %w", err)
	}
	out := make([]session.FeedEntry, 0, len(msgs))
	for _, m := range msgs {
		e, err := feedEntry(tenant, m)
		if err != nil {
			return nil, fmt.Errorf("read feed: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// feedEntry decodes one stream entry of tenant's feed.
func feedEntry(tenant string, m goredis.XMessage) (session.FeedEntry, error) {
	var seq, micros int64
	if _, err := fmt.Sscanf(m.ID, "%d-0", &seq); err != nil {
		return session.FeedEntry{}, fmt.Errorf("entry id %q: %w", m.ID, err)
	}
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	micros, err := strconv.ParseInt(str("t"), 10, 64)
	if err != nil {
		return session.FeedEntry{}, fmt.Errorf("entry %s time: %w", m.ID, err)
	}
	return session.FeedEntry{Tenant: tenant, Seq: seq, SessionID: str("s"), Kind: str("k"),
		Time: time.UnixMicro(micros).UTC(), Data: []byte(str("d"))}, nil
}

// FeedHead returns the newest seq of tenant's feed, 0 for none.
func (s *Store) FeedHead(ctx context.Context, tenant string) (int64, error) {
	_, seq := s.feedKeys(tenant)
	n, err := s.rdb.Get(ctx, seq).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read feed head: %w", err)
	}
	return n, nil
}
