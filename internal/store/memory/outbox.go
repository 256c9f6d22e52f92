package memory

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

var _ webhook.Outbox = (*Store)(nil)

// outbox holds the webhook deliveries, with the claim on each.
type outbox struct {
	mu         sync.Mutex
	deliveries map[string]*outboxEntry // by delivery id; nil until the first add
}

type outboxEntry struct {
	d          webhook.Delivery // Claim is the current claim's token
	claimUntil time.Time
}

// copyDelivery returns d sharing no memory with the store.
func copyDelivery(d webhook.Delivery) webhook.Delivery {
	d.Body = bytes.Clone(d.Body)
	return d
}

// AddDeliveries implements webhook.Outbox.
func (s *Store) AddDeliveries(ctx context.Context, ds ...webhook.Delivery) error {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deliveries == nil {
		o.deliveries = make(map[string]*outboxEntry)
	}
	for _, d := range ds {
		if _, ok := o.deliveries[d.ID]; !ok {
			d.Claim = ""
			o.deliveries[d.ID] = &outboxEntry{d: copyDelivery(d)}
		}
	}
	return nil
}

// ClaimDeliveries implements webhook.Outbox.
func (s *Store) ClaimDeliveries(ctx context.Context, claim string, now time.Time, ttl time.Duration, limit int) ([]webhook.Delivery, error) {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	var due []*outboxEntry
	for _, e := range o.deliveries {
		if e.d.State == webhook.StatePending && !e.d.NextAt.After(now) && !e.claimUntil.After(now) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *outboxEntry) int {
		return cmp.Or(a.d.NextAt.Compare(b.d.NextAt), cmp.Compare(a.d.ID, b.d.ID))
	})
	out := make([]webhook.Delivery, 0, min(limit, len(due)))
	for _, e := range due[:min(limit, len(due))] {
		e.d.Claim, e.claimUntil = claim, now.Add(ttl)
		out = append(out, copyDelivery(e.d))
	}
	return out, nil
}

// FinishAttempt implements webhook.Outbox.
func (s *Store) FinishAttempt(ctx context.Context, d webhook.Delivery) error {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.deliveries[d.ID]
	if !ok || d.Claim == "" || e.d.Claim != d.Claim {
		return webhook.ErrClaimLost
	}
	e.d.State, e.d.Attempts, e.d.NextAt = d.State, d.Attempts, d.NextAt
	e.d.LastAttemptAt, e.d.LastStatus, e.d.LastError = d.LastAttemptAt, d.LastStatus, d.LastError
	e.d.Claim, e.claimUntil = "", time.Time{}
	return nil
}

// GetDelivery implements webhook.Outbox.
func (s *Store) GetDelivery(ctx context.Context, tenant, id string) (webhook.Delivery, error) {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.deliveries[id]
	if !ok || e.d.Tenant != tenant {
		return webhook.Delivery{}, webhook.DeliveryNotFound(id)
	}
	d := copyDelivery(e.d)
	d.Claim = ""
	return d, nil
}

// ListDeliveries implements webhook.Outbox.
func (s *Store) ListDeliveries(ctx context.Context, q webhook.Query) ([]webhook.Delivery, error) {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []webhook.Delivery
	for _, e := range o.deliveries {
		if e.d.Tenant == q.Tenant && (q.State == "" || e.d.State == q.State) &&
			(q.After == nil || newerFirst(e.d, webhook.Delivery{CreatedAt: q.After.CreatedAt, ID: q.After.ID}) > 0) {
			d := copyDelivery(e.d)
			d.Claim = ""
			out = append(out, d)
		}
	}
	slices.SortFunc(out, newerFirst)
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// newerFirst orders deliveries as listings do: newest CreatedAt first,
// then by descending id.
func newerFirst(a, b webhook.Delivery) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
}

// RedeliverDelivery implements webhook.Outbox.
func (s *Store) RedeliverDelivery(ctx context.Context, tenant, id string, now time.Time) (webhook.Delivery, error) {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.deliveries[id]
	if !ok || e.d.Tenant != tenant {
		return webhook.Delivery{}, webhook.DeliveryNotFound(id)
	}
	if e.d.State == webhook.StatePending {
		return webhook.Delivery{}, webhook.DeliveryPending(id)
	}
	e.d.State, e.d.Attempts, e.d.ScheduledAt, e.d.NextAt = webhook.StatePending, 0, now, now
	e.d.Claim, e.claimUntil = "", time.Time{}
	return copyDelivery(e.d), nil
}

// PruneDeliveries implements webhook.Outbox.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	o := &s.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for id, e := range o.deliveries {
		if e.d.State != webhook.StatePending && e.d.LastAttemptAt.Before(before) {
			delete(o.deliveries, id)
			n++
		}
	}
	return n, nil
}
