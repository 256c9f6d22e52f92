package webhook

import (
	"context"
	"errors"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// State is where a delivery is in its life.
type State string

// Delivery states. A pending delivery is due at NextAt; one that was
// taken by its receiver is delivered; one whose retries ran out is
// failed (the dead letters) until it is redelivered.
const (
	StatePending   State = "pending"
	StateDelivered State = "delivered"
	StateFailed    State = "failed"
)

// Valid reports whether s is a delivery state.
func (s State) Valid() bool { return s == StatePending || s == StateDelivered || s == StateFailed }

// Delivery is one payload for one receiver: an outbox row.
type Delivery struct {
	ID        string // the webhook-id: the same on every attempt, so receivers can drop repeats
	Tenant    string
	SessionID string
	Type      string // the event type
	URL       string
	KeyID     string // names the secret that signs it (see Keyring)
	Body      []byte // the JSON payload, signed and sent as it is
	State     State
	Attempts  int       // attempts made since ScheduledAt
	CreatedAt time.Time // when it was announced
	// ScheduledAt starts the retry window: CreatedAt, or when it was last
	// redelivered.
	ScheduledAt   time.Time
	NextAt        time.Time // when a pending delivery is due
	LastAttemptAt time.Time // zero before the first attempt
	LastStatus    int       // the receiver's HTTP status; 0 if none came
	LastError     string    // why the last attempt failed; "" once delivered
	// Claim is set by ClaimDeliveries on the deliveries it returns: the
	// token FinishAttempt must present.
	Claim string
}

// Cursor is the place in a listing after which a page starts: the last
// delivery of the previous page.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// Query selects a tenant's deliveries, newest first: by CreatedAt, then
// by ID for deliveries created at the same instant.
type Query struct {
	Tenant string
	State  State   // "" for every state
	After  *Cursor // only deliveries after it in the listing's order
	Limit  int     // at most this many; 0 means no limit
}

// ErrClaimLost is FinishAttempt's error when another claim took the
// delivery since (the claim expired and another replica claimed it).
var ErrClaimLost = errors.New("webhook: the delivery's claim was lost")

// Outbox is the durable store of deliveries. It is declared here, by the
// package that consumes it; store/memory, store/sqlite and store/redis
// implement it (store/postgres too), and webhook/outboxtest checks that
// they agree. Times are those the caller passes: a store applies no clock
// of its own, so replicas with one store agree on what is due. Stored
// times keep microseconds.
type Outbox interface {
	// AddDeliveries stores new pending deliveries. One whose ID is already
	// stored is left as it is, so writing the same announcement twice
	// delivers it once.
	AddDeliveries(ctx context.Context, ds ...Delivery) error
	// ClaimDeliveries claims up to limit pending deliveries due at now
	// (NextAt <= now) that no unexpired claim holds, earliest due first,
	// until now+ttl, under the token claim, and returns them with Claim
	// set. Two concurrent calls never return the same delivery.
	ClaimDeliveries(ctx context.Context, claim string, now time.Time, ttl time.Duration, limit int) ([]Delivery, error)
	// FinishAttempt stores the outcome of an attempt on a claimed
	// delivery: d's State, Attempts, NextAt, LastAttemptAt, LastStatus and
	// LastError. It releases the claim. If d.Claim no longer holds the
	// delivery it changes nothing and returns ErrClaimLost.
	FinishAttempt(ctx context.Context, d Delivery) error
	// GetDelivery returns a tenant's delivery; another tenant's is not
	// found (errdefs.ErrNotFound).
	GetDelivery(ctx context.Context, tenant, id string) (Delivery, error)
	// ListDeliveries returns the deliveries q selects, newest first.
	ListDeliveries(ctx context.Context, q Query) ([]Delivery, error)
	// RedeliverDelivery makes a tenant's failed or delivered delivery
	// pending again, due at now, with Attempts 0 and ScheduledAt now, and
	// returns it. A pending one is errdefs.ErrConflict; another tenant's is
	// not found.
	RedeliverDelivery(ctx context.Context, tenant, id string, now time.Time) (Delivery, error)
	// PruneDeliveries deletes delivered and failed deliveries whose last
	// attempt was before before, and returns how many it deleted.
	PruneDeliveries(ctx context.Context, before time.Time) (int, error)
}

// DeliveryNotFound is the error an Outbox returns for a delivery it does
// not have, or that is another tenant's.
func DeliveryNotFound(id string) error {
	return errdefs.New(errdefs.ErrNotFound, errdefs.CodeDeliveryNotFound, "webhook delivery %s not found", id)
}

// DeliveryPending is RedeliverDelivery's error for a pending delivery.
func DeliveryPending(id string) error {
	return errdefs.New(errdefs.ErrConflict, errdefs.CodeDeliveryPending,
		"webhook delivery %s is still pending: it will be attempted again by itself", id)
}
