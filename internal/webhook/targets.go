package webhook

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// Route is a configured endpoint and whose sessions it hears about.
type Route struct {
	Endpoint
	Tenant string // only this tenant's sessions; "" for every tenant
	Agent  string // only this agent's sessions; "" for every agent
}

// TargetsConfig says where deliveries go and what signs them.
type TargetsConfig struct {
	// Secret signs deliveries whose endpoint and tenant name no secret.
	Secret string
	// TenantSecrets sign the deliveries of a tenant's sessions to
	// endpoints without a secret of their own: a tenant's receivers then
	// need no secret that another tenant's also hold.
	TenantSecrets map[string]string
	Routes        []Route
	// MaxPerSession bounds the endpoints a session may name at creation.
	MaxPerSession int
	Policy        Policy
}

// DefaultMaxPerSession is the zero TargetsConfig.MaxPerSession.
const DefaultMaxPerSession = 4

// Targets turns announcements into deliveries.
type Targets struct {
	defaultKey *Key
	tenantKeys map[string]Key
	routes     []route
	keys       Keyring
	max        int
	policy     Policy
}

type route struct {
	Route
	key *Key // its own secret, if it has one
}

// NewTargets checks cfg and returns its targets. Every secret is parsed
// and every URL checked here, so a bad one stops kerneld at start.
func NewTargets(cfg TargetsConfig) (*Targets, error) {
	t := &Targets{tenantKeys: make(map[string]Key), keys: make(Keyring), max: cfg.MaxPerSession, policy: cfg.Policy}
	if t.max <= 0 {
		t.max = DefaultMaxPerSession
	}
	var errs []error
	if cfg.Secret != "" {
		k, err := t.keys.Add(cfg.Secret)
		errs = append(errs, prefixErr("webhooks.secret", err))
		t.defaultKey = &k
	}
	for tenant, s := range cfg.TenantSecrets {
		k, err := t.keys.Add(s)
		errs = append(errs, prefixErr("webhooks.tenants."+tenant+".secret", err))
		t.tenantKeys[tenant] = k
	}
	for i, r := range cfg.Routes {
		where := fmt.Sprintf("webhooks.endpoints[%d]", i)
		rt := route{Route: r}
		if r.Secret != "" {
			k, err := t.keys.Add(r.Secret)
			errs = append(errs, prefixErr(where+".secret", err))
			rt.key = &k
		}
		errs = append(errs, prefixErr(where, t.CheckEndpoint(r.Endpoint)))
		if rt.key == nil && !t.canSign(r.Tenant) {
			errs = append(errs, fmt.Errorf("%s: no secret signs it: set its secret or webhooks.secret", where))
		}
		t.routes = append(t.routes, rt)
	}
	return t, errors.Join(errs...)
}

func prefixErr(where string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", where, err)
}

// Keys returns the secrets deliveries may be signed with.
func (t *Targets) Keys() Keyring { return t.keys }

// Policy returns the outbound address policy.
func (t *Targets) Policy() Policy { return t.policy }

// MaxPerSession is how many endpoints a session may name.
func (t *Targets) MaxPerSession() int { return t.max }

// CheckEndpoint validates an endpoint's URL and events.
func (t *Targets) CheckEndpoint(e Endpoint) error {
	if err := t.policy.CheckURL(e.URL); err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if len(e.Events) == 0 {
		return fmt.Errorf("events: name at least one of %s, or %q", strings.Join(EventTypes, ", "), AllEvents)
	}
	for _, ev := range e.Events {
		if !KnownEvent(ev) {
			return fmt.Errorf("events: unknown event %q (known: %s, or %q)", ev, strings.Join(EventTypes, ", "), AllEvents)
		}
	}
	return nil
}

// CheckSessionEndpoints validates what a session of tenant names at
// creation: each endpoint, how many, and that a secret signs them.
func (t *Targets) CheckSessionEndpoints(tenant string, es []Endpoint) error {
	if len(es) == 0 {
		return nil
	}
	if len(es) > t.max {
		return fmt.Errorf("at most %d webhooks per session", t.max)
	}
	if !t.canSign(tenant) {
		return errors.New("no webhook secret is configured for this tenant (webhooks.secret)")
	}
	for i, e := range es {
		if e.Secret != "" {
			return fmt.Errorf("[%d]: a session's webhooks are signed with the tenant's secret", i)
		}
		if err := t.CheckEndpoint(e); err != nil {
			return fmt.Errorf("[%d].%w", i, err)
		}
	}
	return nil
}

// canSign reports whether a tenant's deliveries have a secret.
func (t *Targets) canSign(tenant string) bool {
	if _, ok := t.tenantKeys[tenant]; ok {
		return true
	}
	return t.defaultKey != nil
}

// keyFor returns the key that signs a delivery to an endpoint with key own
// (nil if none) for tenant.
func (t *Targets) keyFor(tenant string, own *Key) (Key, bool) {
	if own != nil {
		return *own, true
	}
	if k, ok := t.tenantKeys[tenant]; ok {
		return k, true
	}
	if t.defaultKey != nil {
		return *t.defaultKey, true
	}
	return Key{}, false
}

// Deliveries returns the deliveries a announces: one per endpoint that
// wants its type, from the configured routes that match its tenant and
// agent and from its own Endpoints, one per URL. An endpoint no secret
// signs is skipped (CheckSessionEndpoints refuses those up front).
func (t *Targets) Deliveries(a Announcement) ([]Delivery, error) {
	var out []Delivery
	seen := make(map[string]bool)
	add := func(e Endpoint, own *Key) error {
		if !e.Wants(a.Type) || seen[e.URL] {
			return nil
		}
		key, ok := t.keyFor(a.Tenant, own)
		if !ok {
			return nil
		}
		seen[e.URL] = true
		d, err := newDelivery(a, e.URL, key.ID)
		out = append(out, d)
		return err
	}
	for _, r := range t.routes {
		if (r.Tenant == "" || r.Tenant == a.Tenant) && (r.Agent == "" || r.Agent == a.Agent) {
			if err := add(r.Endpoint, r.key); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range a.Endpoints {
		if err := add(Endpoint{URL: e.URL, Events: e.Events}, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// payload is the body of every delivery, in the Standard Webhooks shape.
type payload struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// newDelivery returns a's pending delivery to url, signed by key keyID.
func newDelivery(a Announcement, url, keyID string) (Delivery, error) {
	data := make(map[string]any, len(a.Data)+4)
	for k, v := range a.Data {
		data[k] = v
	}
	data["tenant"], data["session_id"] = a.Tenant, session.PublicID(a.SessionID) // as clients know it
	if a.Agent != "" {
		data["agent"] = a.Agent
	}
	if a.RunID != "" {
		data["run_id"] = a.RunID
	}
	at := a.Time.UTC().Truncate(time.Microsecond)
	body, err := json.Marshal(payload{Type: a.Type, Timestamp: at, Data: data})
	if err != nil {
		return Delivery{}, fmt.Errorf("encode %s webhook: %w", a.Type, err)
	}
	return Delivery{
		ID: deliveryID(a, url), Tenant: a.Tenant, SessionID: a.SessionID, Type: a.Type, URL: url, KeyID: keyID,
		Body: body, State: StatePending, CreatedAt: at, ScheduledAt: at, NextAt: at,
	}, nil
}

// deliveryID derives the webhook-id from what is announced and where to:
// the same announcement to the same URL always has the same id.
func deliveryID(a Announcement, url string) string {
	sum := sha256.Sum256([]byte(a.Tenant + "\x00" + a.SessionID + "\x00" + a.Key + "\x00" + a.Type + "\x00" + url))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}
