package kernel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// maxTemperature bounds a temperature override; providers accept 0..2 at
// most (Anthropic 0..1, and says so itself).
const maxTemperature = 2.0

// checkOverrides checks o, the overrides of a session or a run, against
// what the agent allows. A malformed value is ErrInvalid; a value the
// agent does not list is a 422 override_not_allowed naming the field and
// the value.
func checkOverrides(spec agents.Spec, o *session.Overrides) error {
	if o == nil {
		return nil
	}
	if err := checkOverrideShape(o); err != nil {
		return err
	}
	p := spec.Overrides
	switch {
	case o.Model != "" && !spec.AllowsModel(o.Model):
		allowed := append([]string{spec.Model.Name}, p.Models...)
		return notAllowed("overrides.model", o.Model, "agent %q allows the models %s", spec.Name, strings.Join(allowed, ", "))
	case o.ReasoningEffort != "" && !p.ReasoningEffort:
		return notAllowed("overrides.reasoning_effort", o.ReasoningEffort, "agent %q does not allow choosing reasoning_effort", spec.Name)
	case o.Temperature != nil && !p.Temperature:
		return notAllowed("overrides.temperature", *o.Temperature, "agent %q does not allow choosing temperature", spec.Name)
	case o.MaxTokens != nil && !p.MaxTokens:
		return notAllowed("overrides.max_tokens", *o.MaxTokens, "agent %q does not allow choosing max_tokens", spec.Name)
	}
	return nil
}

// checkOverrideShape checks the values themselves, whatever the agent.
func checkOverrideShape(o *session.Overrides) error {
	var v *errdefs.ValidationError
	if o.ReasoningEffort != "" && !slices.Contains(session.ReasoningEfforts, o.ReasoningEffort) {
		v = v.Add("overrides.reasoning_effort", "must be one of "+strings.Join(session.ReasoningEfforts, ", "))
	}
	if t := o.Temperature; t != nil && (*t < 0 || *t > maxTemperature) {
		v = v.Add("overrides.temperature", fmt.Sprintf("must be between 0 and %g", maxTemperature))
	}
	if n := o.MaxTokens; n != nil && *n < 1 {
		v = v.Add("overrides.max_tokens", "must be at least 1")
	}
	return v.Err()
}

// notAllowed is the error of an override the agent does not allow.
func notAllowed(field string, value any, format string, args ...any) error {
	return errdefs.New(errdefs.ErrUnprocessable, errdefs.CodeOverrideNotAllowed, "%s %v is not allowed: %s",
		field, value, fmt.Sprintf(format, args...)).With("field", field).With("value", value)
}

// modelSettings are the model settings a run's calls use: the run's
// overrides over the session's over the agent's own.
type modelSettings struct {
	Model           string
	ReasoningEffort string
	Temperature     *float64
	MaxTokens       int
}

// settingsOf returns the settings of run r of session s.
func settingsOf(spec agents.Spec, s session.Session, r session.Run) modelSettings {
	out := modelSettings{Model: spec.Model.Name, Temperature: spec.Model.Temperature, MaxTokens: spec.Model.MaxTokens}
	own := s.Overrides
	if r.Agent != "" {
		own = nil // the session's overrides are its agent's; another agent's run takes its own only
	}
	for _, o := range []*session.Overrides{own, r.Overrides} { // the run's last: it wins
		if o == nil {
			continue
		}
		if o.Model != "" {
			out.Model = o.Model
		}
		if o.ReasoningEffort != "" {
			out.ReasoningEffort = o.ReasoningEffort
		}
		if o.Temperature != nil {
			out.Temperature = o.Temperature
		}
		if o.MaxTokens != nil {
			out.MaxTokens = *o.MaxTokens
		}
	}
	return out
}

// modelChanged returns the kerneld.model.changed event of a run that uses
// model in session s, whose previous run used s.Model; none when it is the
// same, or for the session's first run.
func modelChanged(s session.Session, runID, model string) []session.Event {
	if s.Model == "" || s.Model == model {
		return nil
	}
	return []session.Event{session.Custom("kerneld.model.changed", map[string]string{"runId": runID, "from": s.Model, "to": model})}
}

// checkSessionOverrides checks overrides a client sets on session s.
func (k *Kernel) checkSessionOverrides(s session.Session, o *session.Overrides) error {
	if o == nil {
		return nil
	}
	spec, err := k.agents.Get(s.Agent)
	if err != nil {
		return err
	}
	return checkOverrides(spec, o)
}

// nonEmpty returns a copy of o, or nil when o sets nothing.
func nonEmpty(o *session.Overrides) *session.Overrides {
	if o == nil || *o == (session.Overrides{}) {
		return nil
	}
	return o.Clone()
}
