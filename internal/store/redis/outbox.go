package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/webhook"
)

// The webhook outbox. Its keys, beside the session keys of the package
// doc, are:
//
//	P wh:d:<id>                 hash: doc (deliveryDoc, what never changes), tenant, state,
//	                            attempts, sched, next, last, status, error, claim, lkey
//	P wh:due                    sorted set: pending ids by when they are next due (see outbox_claim.lua)
//	P wh:done                   sorted set: finished ids by their last attempt, for pruning
//	P wh:all:<tenant>           lex set: the tenant's order keys (created, then id)
//	P wh:st:<state>:<tenant>    lex set: the same, of one state
//
// Times are microseconds since 1970, which a sorted set's score holds
// exactly.
var _ webhook.Outbox = (*Store)(nil)

var (
	scriptOutboxAdd       = newScript("outbox_add")
	scriptOutboxClaim     = newScript("outbox_claim")
	scriptOutboxFinish    = newScript("outbox_finish")
	scriptOutboxRedeliver = newScript("outbox_redeliver")
	scriptOutboxPrune     = newScript("outbox_prune")
)

// Replies of the outbox's scripts.
const (
	replyNotFound = "NOTFOUND"
	replyPending  = "PENDING"
)

// deliveryDoc is the part of a delivery that never changes, stored as
// JSON. Its names are stored: renaming one is a migration.
type deliveryDoc struct {
	SessionID string `json:"session_id"`
	Type      string `json:"type"`
	URL       string `json:"url"`
	KeyID     string `json:"key_id"`
	Body      []byte `json:"body"`
	CreatedAt int64  `json:"created_at"`
}

// AddDeliveries implements webhook.Outbox.
func (s *Store) AddDeliveries(ctx context.Context, ds ...webhook.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	args := []any{s.prefix}
	for _, d := range ds {
		doc, err := json.Marshal(deliveryDoc{SessionID: d.SessionID, Type: d.Type, URL: d.URL, KeyID: d.KeyID,
			Body: d.Body, CreatedAt: micros(d.CreatedAt)})
		if err != nil {
			return fmt.Errorf("add webhook delivery %s: %w", d.ID, err)
		}
		args = append(args, d.ID, d.Tenant, doc, micros(d.ScheduledAt), micros(d.NextAt), orderKey(d.CreatedAt, d.ID))
	}
	if err := scriptOutboxAdd.Run(ctx, s.rdb, nil, args...).Err(); err != nil {
		return fmt.Errorf("add webhook deliveries: %w", err)
	}
	return nil
}

// ClaimDeliveries implements webhook.Outbox. One script claims, so two
// replicas never claim one delivery.
func (s *Store) ClaimDeliveries(ctx context.Context, claim string, now time.Time, ttl time.Duration, limit int) ([]webhook.Delivery, error) {
	res, err := scriptOutboxClaim.Run(ctx, s.rdb, nil, s.prefix, claim, micros(now), micros(now.Add(ttl)), limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	out := make([]webhook.Delivery, 0, len(res))
	for _, h := range res {
		d, err := decodeDelivery(h)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// FinishAttempt implements webhook.Outbox.
func (s *Store) FinishAttempt(ctx context.Context, d webhook.Delivery) error {
	last := ""
	if !d.LastAttemptAt.IsZero() {
		last = strconv.FormatInt(micros(d.LastAttemptAt), 10)
	}
	n, err := scriptOutboxFinish.Run(ctx, s.rdb, nil, s.prefix, d.ID, d.Claim, string(d.State), d.Attempts,
		micros(d.NextAt), last, d.LastStatus, d.LastError).Int()
	switch {
	case err != nil:
		return fmt.Errorf("record webhook delivery %s: %w", d.ID, err)
	case n == 0:
		return webhook.ErrClaimLost
	}
	return nil
}

// GetDelivery implements webhook.Outbox.
func (s *Store) GetDelivery(ctx context.Context, tenant, id string) (webhook.Delivery, error) {
	h, err := s.rdb.HGetAll(ctx, s.prefix+"wh:d:"+id).Result()
	if err != nil {
		return webhook.Delivery{}, fmt.Errorf("get webhook delivery %s: %w", id, err)
	}
	if h["tenant"] != tenant || len(h) == 0 {
		return webhook.Delivery{}, webhook.DeliveryNotFound(id)
	}
	h["id"], h["claim"] = id, ""
	return deliveryFromHash(h)
}

// ListDeliveries implements webhook.Outbox: a page of order keys from
// the tenant's lex set, newest first, then their hashes in one round trip.
func (s *Store) ListDeliveries(ctx context.Context, q webhook.Query) ([]webhook.Delivery, error) {
	key := s.prefix + "wh:all:" + q.Tenant
	if q.State != "" {
		key = s.prefix + "wh:st:" + string(q.State) + ":" + q.Tenant
	}
	top := "+"
	if q.After != nil {
		top = "(" + orderKey(q.After.CreatedAt, q.After.ID)
	}
	var count int64
	if q.Limit > 0 {
		count = int64(q.Limit)
	}
	lkeys, err := s.rdb.ZRevRangeByLex(ctx, key, &goredis.ZRangeBy{Max: top, Min: "-", Count: count}).Result()
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, len(lkeys))
	for i, lk := range lkeys {
		cmds[i] = pipe.HGetAll(ctx, s.prefix+"wh:d:"+lk[len(timeKey(0)):])
	}
	if len(cmds) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("list webhook deliveries: %w", err)
		}
	}
	out := make([]webhook.Delivery, 0, len(cmds))
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			continue // pruned between the two reads
		}
		h["id"], h["claim"] = lkeys[i][len(timeKey(0)):], ""
		d, err := deliveryFromHash(h)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// RedeliverDelivery implements webhook.Outbox.
func (s *Store) RedeliverDelivery(ctx context.Context, tenant, id string, now time.Time) (webhook.Delivery, error) {
	res, err := scriptOutboxRedeliver.Run(ctx, s.rdb, nil, s.prefix, id, tenant, micros(now)).Slice()
	switch {
	case isReply(err, replyNotFound):
		return webhook.Delivery{}, webhook.DeliveryNotFound(id)
	case isReply(err, replyPending):
		return webhook.Delivery{}, webhook.DeliveryPending(id)
	case err != nil:
		return webhook.Delivery{}, fmt.Errorf("redeliver webhook delivery %s: %w", id, err)
	}
	d, err := decodeDelivery(res)
	d.Claim = ""
	return d, err
}

// pruneBatch bounds the deliveries one prune script deletes, so that a
// large backlog does not hold Redis for long.
const pruneBatch = 500

// PruneDeliveries implements webhook.Outbox.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		n, err := scriptOutboxPrune.Run(ctx, s.rdb, nil, s.prefix, micros(before), pruneBatch).Int()
		total += n
		if err != nil {
			return total, fmt.Errorf("prune webhook deliveries: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

// decodeDelivery reads a delivery from a script's flat HGETALL array.
func decodeDelivery(v any) (webhook.Delivery, error) {
	arr, ok := v.([]any)
	if !ok || len(arr)%2 != 0 {
		return webhook.Delivery{}, errors.New("read webhook delivery: malformed reply")
	}
	h := make(map[string]string, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		k, _ := arr[i].(string)
		switch val := arr[i+1].(type) {
		case string:
			h[k] = val
		case int64:
			h[k] = strconv.FormatInt(val, 10)
		}
	}
	return deliveryFromHash(h)
}

// deliveryFromHash builds a delivery from its hash, with "id" added.
func deliveryFromHash(h map[string]string) (webhook.Delivery, error) {
	var doc deliveryDoc
	if err := json.Unmarshal([]byte(h["doc"]), &doc); err != nil {
		return webhook.Delivery{}, fmt.Errorf("read webhook delivery %s: %w", h["id"], err)
	}
	d := webhook.Delivery{
		ID: h["id"], Tenant: h["tenant"], SessionID: doc.SessionID, Type: doc.Type, URL: doc.URL, KeyID: doc.KeyID,
		Body: doc.Body, State: webhook.State(h["state"]), CreatedAt: fromMicros(doc.CreatedAt),
		LastError: h["error"], Claim: h["claim"],
	}
	var err error
	num := func(name string) int64 {
		n, perr := strconv.ParseInt(h[name], 10, 64)
		if perr != nil && h[name] != "" {
			err = fmt.Errorf("read webhook delivery %s: field %s: %w", d.ID, name, perr)
		}
		return n
	}
	d.Attempts, d.LastStatus = int(num("attempts")), int(num("status"))
	d.ScheduledAt, d.NextAt = fromMicros(num("sched")), fromMicros(num("next"))
	if h["last"] != "" {
		d.LastAttemptAt = fromMicros(num("last"))
	}
	return d, err
}
