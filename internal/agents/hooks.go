package agents

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// GuardSpec is an agent's guard: a policy service kerneld asks before
// each of the agent's tool calls (and, with BeforeRun, before each run)
// whether it may go ahead. See internal/guard.
type GuardSpec struct {
	URL       string
	Secret    string        // signs the requests ("whsec_" + base64)
	Timeout   time.Duration // 0: the guard package's default
	OnFailure string        // deny (the default: fail closed) or allow (fail open)
	BeforeRun bool
}

// WebhookSpec is a receiver of the agent's sessions' events, signed with
// their tenant's webhook secret.
type WebhookSpec struct {
	URL    string
	Events []string
}

// decodeGuard decodes the guard block; null leaves it unset.
func decodeGuard(path string, n *yaml.Node, dst **GuardSpec) error {
	if isNull(n) {
		return nil
	}
	g := &GuardSpec{}
	*dst = g
	return decodeMapping(path, n, map[string]fieldFunc{
		"url": value(&g.URL), "secret": value(&g.Secret), "timeout": duration(&g.Timeout),
		"on_failure": value(&g.OnFailure), "before_run": value(&g.BeforeRun),
	})
}

// decodeWebhooks decodes the webhooks list.
func decodeWebhooks(path string, n *yaml.Node, dst *[]WebhookSpec) error {
	items, err := listItems(path, n)
	if err != nil {
		return err
	}
	*dst = make([]WebhookSpec, len(items))
	for i, item := range items {
		w := &(*dst)[i]
		if err := decodeMapping(fmt.Sprintf("%s[%d]", path, i), item, map[string]fieldFunc{
			"url": value(&w.URL), "events": value(&w.Events),
		}); err != nil {
			return err
		}
	}
	return nil
}

// validateHooks checks the guard and webhooks with the checks kerneld
// passes in (the URLs a request may go to, the secrets' form); an unset
// ${VAR} behind a required field is named.
func validateHooks(s Spec, opts Options) error {
	if s.Guard != nil {
		if s.Guard.URL == "" {
			return fieldError("guard.url", "required%s", notSet(s.unsetEnv["guard.url"]))
		}
		if s.Guard.Secret == "" {
			return fieldError("guard.secret", "required: the guard's requests are signed%s", notSet(s.unsetEnv["guard.secret"]))
		}
		if opts.CheckGuard != nil {
			if err := opts.CheckGuard(*s.Guard); err != nil {
				return fmt.Errorf("guard.%w", err)
			}
		}
	}
	for i, w := range s.Webhooks {
		if opts.CheckWebhook != nil {
			if err := opts.CheckWebhook(w); err != nil {
				return fmt.Errorf("webhooks[%d].%w", i, err)
			}
		}
	}
	return nil
}
