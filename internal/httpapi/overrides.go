package httpapi

import (
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// overridesBody is the `overrides` member of sessions and runs: model
// settings chosen within what the agent allows.
type overridesBody struct {
	Model           *string  `json:"model,omitempty"`
	ReasoningEffort *string  `json:"reasoning_effort,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxTokens       *int     `json:"max_tokens,omitempty"`
}

// check refuses NUL in the names overrides choose; nil is fine.
func (b *overridesBody) check(v *errdefs.ValidationError) *errdefs.ValidationError {
	if b == nil {
		return v
	}
	if b.Model != nil {
		v = checkNoNUL(v, "overrides.model", *b.Model)
	}
	if b.ReasoningEffort != nil {
		v = checkNoNUL(v, "overrides.reasoning_effort", *b.ReasoningEffort)
	}
	return v
}

// toOverrides converts a request's overrides; nil stays nil.
func (b *overridesBody) toOverrides() *session.Overrides {
	if b == nil {
		return nil
	}
	o := &session.Overrides{Temperature: b.Temperature, MaxTokens: b.MaxTokens}
	if b.Model != nil {
		o.Model = *b.Model
	}
	if b.ReasoningEffort != nil {
		o.ReasoningEffort = *b.ReasoningEffort
	}
	return o
}

// toOverridesBody shapes stored overrides for a response: an object
// holding the chosen settings, empty when none are.
func toOverridesBody(o *session.Overrides) overridesBody {
	if o == nil {
		return overridesBody{}
	}
	return overridesBody{
		Model: nullable(o.Model), ReasoningEffort: nullable(o.ReasoningEffort),
		Temperature: o.Temperature, MaxTokens: o.MaxTokens,
	}
}
