package llm

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// Defaults of the options every network provider takes.
const (
	DefaultTimeout    = 120 * time.Second
	DefaultMaxRetries = 3
	maxMaxRetries     = 10
)

// DecodeOptions strictly decodes the provider-specific members of a model
// block (ModelConfig.Options) for a network provider: timeout and
// max_retries go into the returned CallPolicy, and each key of extra into
// the value its pointer points to (a *time.Duration takes a Go duration
// string such as "90s"; any other pointer is decoded as YAML would).
//
// An unknown key, a value of the wrong type or an out-of-range timeout or
// max_retries is an error matching errdefs.ErrInvalid that names the option,
// as llm/scripted reports its own: a typo must not silently fall back to a
// default.
func DecodeOptions(raw map[string]any, extra map[string]any) (CallPolicy, error) {
	p := DefaultCallPolicy()
	fields := map[string]any{"timeout": &p.Timeout, "max_retries": &p.MaxRetries}
	maps.Copy(fields, extra)
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		dst, ok := fields[key]
		if !ok {
			known := strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
			return p, errdefs.Invalid(key, "unknown option (known: "+known+")")
		}
		if err := decodeOption(raw[key], dst); err != nil {
			return p, errdefs.Invalid(key, err.Error())
		}
	}
	return p, p.validate()
}

// CheckBaseURL returns an error matching errdefs.ErrInvalid that names
// base_url when raw is set but is not an absolute http or https URL;
// example, a URL the provider would accept, goes in the message.
func CheckBaseURL(raw, example string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errdefs.Invalid("base_url", "must be an http or https URL such as "+example)
	}
	return nil
}

// MissingAPIKey is the error of a model block that needs an api_key and
// has none. It matches errdefs.ErrUnavailable, which lists the agent as
// unavailable rather than failing startup: the other agents still run.
// orField, when not empty, names the field that would do instead of a key
// (an OpenAI-compatible base_url pointing at a local server); the agent's
// unavailable reason then says so.
func MissingAPIKey(orField string) error {
	err := errdefs.New(errdefs.ErrUnavailable, errdefs.CodeMissingAPIKey, "model.api_key is empty").With("field", "model.api_key")
	if orField != "" {
		err = err.With("or_field", orField)
	}
	return err
}

// validate checks the decoded timeout and max_retries.
func (p CallPolicy) validate() error {
	var v *errdefs.ValidationError
	if p.Timeout <= 0 {
		v = v.Add("timeout", "must be positive")
	}
	if p.MaxRetries < 0 || p.MaxRetries > maxMaxRetries {
		v = v.Add("max_retries", fmt.Sprintf("must be between 0 and %d", maxMaxRetries))
	}
	return v.Err()
}

// decodeOption decodes one option value into dst. The value is re-encoded
// as YAML so that it gets the same type checks as the rest of the agent
// file, whether it came from YAML or was built in Go.
func decodeOption(value any, dst any) error {
	var n yaml.Node
	if err := n.Encode(value); err != nil {
		return fmt.Errorf("cannot be read: %w", err)
	}
	if d, ok := dst.(*time.Duration); ok {
		v, err := time.ParseDuration(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			return fmt.Errorf("must be a duration such as 90s, got %q", n.Value)
		}
		*d = v
		return nil
	}
	if err := n.Decode(dst); err != nil {
		return errors.New(YAMLProblem(err))
	}
	return nil
}

// linePrefix matches the "line N: " yaml puts on type errors.
var linePrefix = regexp.MustCompile(`^line \d+: `)

// YAMLProblem turns a yaml decoding error into a short problem text: each
// type error without the "line N: " yaml puts on it, joined with "; ".
// Callers that know the line in the agent file say it themselves; for a
// value decoded again from a re-encoded node, yaml's line would mislead.
func YAMLProblem(err error) string {
	te, ok := errors.AsType[*yaml.TypeError](err)
	if !ok || len(te.Errors) == 0 {
		return err.Error()
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = linePrefix.ReplaceAllString(e, "")
	}
	return strings.Join(msgs, "; ")
}
