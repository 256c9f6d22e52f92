package session

import "time"

// FeedEntry is one change in a tenant's session feed: what happened to
// which session, with the session's summary as it was then.
type FeedEntry struct {
	Tenant    string
	Seq       int64 // 1, 2, 3… per tenant, assigned by the store on append
	SessionID string
	Kind      string
	Time      time.Time
	Data      []byte // the summary, JSON text the store keeps as it is
}
