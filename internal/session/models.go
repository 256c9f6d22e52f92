package session

import (
	"encoding/json"
	"strconv"
)

// ReasoningEfforts are the values Overrides.ReasoningEffort may take, from
// least to most thinking.
var ReasoningEfforts = []string{"minimal", "low", "medium", "high"}

// ModelUsage is what one model consumed within a run: RUN_FINISHED and
// RUN_ERROR list one entry per model a run called (the run's own, and the
// one that wrote a compaction summary, when that was another).
type ModelUsage struct {
	Provider string
	Model    string
	Usage
}

// appendModelUsage appends AG-UI's usage array with one entry per model.
func appendModelUsage(b []byte, models []ModelUsage) []byte {
	b = append(b, '[')
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"inputTokens":`...)
		b = strconv.AppendInt(b, m.InputTokens, 10)
		b = append(b, `,"outputTokens":`...)
		b = strconv.AppendInt(b, m.OutputTokens, 10)
		b = append(b, `,"totalTokens":`...)
		b = strconv.AppendInt(b, m.InputTokens+m.OutputTokens, 10)
		if m.Provider != "" {
			b = appendString(append(b, `,"provider":`...), m.Provider)
		}
		if m.Model != "" {
			b = appendString(append(b, `,"model":`...), m.Model)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// usageMember returns the usage array of a run's terminal event: per
// model when the run says which models it called, else the total alone.
func usageMember(total Usage, models []ModelUsage) []byte {
	if len(models) == 0 {
		return appendUsage(nil, total)
	}
	return appendModelUsage(nil, models)
}

// WithMeta returns e with key set to value in metadata.kerneld.
func (e Event) WithMeta(key string, value any) Event {
	var m map[string]any
	if len(e.Meta) > 0 {
		_ = json.Unmarshal(e.Meta, &m) // Meta is always an object this package built
	}
	if m == nil {
		m = make(map[string]any, 1)
	}
	m[key] = value
	e.Meta, _ = json.Marshal(m) // a map of strings and JSON values always marshals
	return e
}
