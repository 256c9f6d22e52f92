package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/kerneld/kerneld/internal/webhook"
)

// WebhooksConfig says where kerneld sends webhooks, what signs them, and
// how they are retried. Agent files and sessions name more endpoints;
// those are signed with their tenant's secret or Secret.
type WebhooksConfig struct {
	// Secret signs deliveries no other secret signs: "whsec_" + base64,
	// e.g. ${KERNELD_WEBHOOK_SECRET}. Without it (and without a tenant's
	// secret) a session's webhooks are refused.
	Secret    string                         `yaml:"secret"`
	Endpoints []WebhookEndpoint              `yaml:"endpoints"` // the operator's, for every tenant unless one is named
	Tenants   map[string]TenantWebhookConfig `yaml:"tenants"`
	// MaxPerSession bounds the webhooks a session may name at creation.
	MaxPerSession int           `yaml:"max_per_session"`
	Timeout       time.Duration `yaml:"timeout"`     // one attempt
	RetryFor      time.Duration `yaml:"retry_for"`   // then the delivery is failed (a dead letter)
	MinBackoff    time.Duration `yaml:"min_backoff"` // first wait between attempts, doubling
	MaxBackoff    time.Duration `yaml:"max_backoff"`
	KeepFor       time.Duration `yaml:"keep_for"` // finished deliveries are deleted after this
	// AllowNetworks lifts the block on link-local and metadata addresses
	// for these CIDRs; DenyNetworks blocks more (e.g. 10.0.0.0/8).
	AllowNetworks []string `yaml:"allow_networks"`
	DenyNetworks  []string `yaml:"deny_networks"`
}

// WebhookEndpoint is a receiver in the config.
type WebhookEndpoint struct {
	URL    string   `yaml:"url"`
	Events []string `yaml:"events"` // event types, or "*"
	Tenant string   `yaml:"tenant"` // only this tenant's sessions
	Agent  string   `yaml:"agent"`  // only this agent's sessions
	Secret string   `yaml:"secret"` // its own secret
}

// TenantWebhookConfig is one tenant's secret and receivers.
type TenantWebhookConfig struct {
	Secret    string            `yaml:"secret"`
	Endpoints []WebhookEndpoint `yaml:"endpoints"`
}

// defaultWebhooks are the defaults of the webhook keys.
func defaultWebhooks() WebhooksConfig {
	return WebhooksConfig{
		MaxPerSession: webhook.DefaultMaxPerSession, Timeout: webhook.DefaultTimeout, RetryFor: webhook.DefaultRetryFor,
		MinBackoff: webhook.DefaultMinBackoff, MaxBackoff: webhook.DefaultMaxBackoff, KeepFor: webhook.DefaultKeepFor,
	}
}

// check refuses durations that are not positive and networks that do
// not parse; the secrets and endpoints are checked by targets.
func (c WebhooksConfig) check() error {
	var errs []error
	if c.MaxPerSession <= 0 || c.Timeout <= 0 || c.RetryFor <= 0 || c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff || c.KeepFor <= 0 {
		errs = append(errs, errors.New("webhooks: max_per_session, timeout, retry_for, min_backoff and keep_for must be positive, "+
			"and max_backoff at least min_backoff"))
	}
	_, err := c.policy()
	return errors.Join(append(errs, err)...)
}

// policy returns the outbound address policy.
func (c WebhooksConfig) policy() (webhook.Policy, error) {
	var p webhook.Policy
	var errs []error
	parse := func(key string, cidrs []string) []netip.Prefix {
		var out []netip.Prefix
		for i, s := range cidrs {
			n, err := netip.ParsePrefix(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("webhooks.%s[%d]: %q is not a CIDR such as 169.254.10.0/24", key, i, s))
			}
			out = append(out, n)
		}
		return out
	}
	p.Allow, p.Deny = parse("allow_networks", c.AllowNetworks), parse("deny_networks", c.DenyNetworks)
	return p, errors.Join(errs...)
}

// targets returns where webhooks go, checking every secret and URL.
func (c WebhooksConfig) targets() (*webhook.Targets, error) {
	policy, err := c.policy()
	if err != nil {
		return nil, err
	}
	cfg := webhook.TargetsConfig{Secret: c.Secret, TenantSecrets: map[string]string{}, MaxPerSession: c.MaxPerSession, Policy: policy}
	route := func(e WebhookEndpoint, tenant string) webhook.Route {
		return webhook.Route{Endpoint: webhook.Endpoint{URL: e.URL, Events: e.Events, Secret: e.Secret}, Tenant: tenant, Agent: e.Agent}
	}
	for _, e := range c.Endpoints {
		cfg.Routes = append(cfg.Routes, route(e, e.Tenant))
	}
	for tenant, tc := range c.Tenants {
		if tc.Secret != "" {
			cfg.TenantSecrets[tenant] = tc.Secret
		}
		for _, e := range tc.Endpoints {
			cfg.Routes = append(cfg.Routes, route(e, tenant))
		}
	}
	t, err := webhook.NewTargets(cfg)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return t, nil
}

// dispatcher returns the dispatcher of the store's outbox, or nil when the
// store keeps none.
func (c WebhooksConfig) dispatcher(db store, targets *webhook.Targets, replica string, log *slog.Logger) *webhook.Dispatcher {
	outbox, ok := db.(webhook.Outbox)
	if !ok {
		log.Warn("webhooks are off: this store keeps no webhook outbox")
		return nil
	}
	return webhook.NewDispatcher(webhook.DispatcherOptions{
		Outbox: outbox, Keys: targets.Keys(), Policy: targets.Policy(), Replica: replica,
		Timeout: c.Timeout, RetryFor: c.RetryFor, MinBackoff: c.MinBackoff, MaxBackoff: c.MaxBackoff, KeepFor: c.KeepFor,
		UserAgent: "kerneld/" + version, Logger: log,
	})
}
