package agents

import (
	"fmt"
	"slices"
)

// OverridePolicy lists the model settings a client may choose for the
// agent's sessions and runs. Nothing is overridable unless listed: a zero
// policy allows no override at all.
type OverridePolicy struct {
	// Models a client may pick; the agent's own model is always allowed.
	Models          []string
	ReasoningEffort bool
	Temperature     bool
	MaxTokens       bool
}

// AllowsModel reports whether a client may pick model for the agent.
func (s Spec) AllowsModel(model string) bool {
	return model == s.Model.Name || slices.Contains(s.Overrides.Models, model)
}

// validateOverrides checks the overrides block: model names are given and
// listed once.
func validateOverrides(p OverridePolicy) error {
	seen := make(map[string]int, len(p.Models))
	for i, m := range p.Models {
		field := fmt.Sprintf("overrides.models[%d]", i)
		if m == "" {
			return fieldError(field, "must not be empty")
		}
		if j, dup := seen[m]; dup {
			return fieldError(field, "duplicate model %q (also overrides.models[%d])", m, j)
		}
		seen[m] = i
	}
	return nil
}
