package scripted

import (
	"encoding/json"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// options are the scripted provider's members of an agent's model block.
type options struct {
	tokenDelay time.Duration // pause before each streamed token
	steps      []step        // one per model call of a run; the last repeats
	errMsg     string        // when set, every call fails with this message ...
	failAfter  int           // ... after this many text and reasoning tokens
	summary    string        // the answer to a compaction summary request
	summaryErr string        // when set, summary requests fail with this message
	crashAfter int           // when set, every call ends the process after this many tokens (see faults.go)
	// replies answer a run whose input starts with one's prefix with its
	// text alone, instead of the script: an input kerneld posts itself (a
	// background child's result, a schedule's) can get its own answer.
	replies []resultText
}

// step is what the model answers to one call.
type step struct {
	text      string
	reasoning string
	calls     []toolCall
	// whenResult replaces text by the first entry whose prefix starts the
	// last tool result the call sees, so a script can answer what a tool
	// said (an approval's denial, say) the way a model reads it.
	whenResult []resultText
}

// resultText is a step's text for a tool result that starts with prefix.
type resultText struct {
	prefix string
	text   string
}

// toolCall is one scripted tool call with its arguments as JSON text.
type toolCall struct {
	name string
	args string
}

// fieldFunc decodes the value n of the option at path.
type fieldFunc func(path string, n *yaml.Node) error

// decodeOptions strictly decodes raw into options and validates them.
// The map is walked as a YAML node tree rather than unmarshalled into a
// tagged struct so that unknown and mistyped fields are reported with
// their full path, e.g. "script[1].tool_calls[0].nme".
func decodeOptions(raw map[string]any) (options, error) {
	var root yaml.Node
	if err := root.Encode(raw); err != nil {
		return options{}, fmt.Errorf("encode scripted options: %w", err)
	}
	var o options
	err := decodeMapping("", &root, map[string]fieldFunc{
		"token_delay":        durationField(&o.tokenDelay),
		"script":             func(p string, n *yaml.Node) error { return decodeSteps(p, n, &o.steps) },
		"error":              valueField(&o.errMsg),
		"fail_after_tokens":  valueField(&o.failAfter),
		"summary":            valueField(&o.summary),
		"summary_error":      valueField(&o.summaryErr),
		"crash_after_tokens": valueField(&o.crashAfter),
		"replies":            func(p string, n *yaml.Node) error { return decodeWhenResult(p, n, &o.replies) },
	})
	if err != nil {
		return options{}, err
	}
	return o, o.validate()
}

// validate reports every semantic problem at once, so a script author
// fixes them in one pass.
func (o options) validate() error {
	var v *errdefs.ValidationError
	if o.tokenDelay < 0 {
		v = v.Add("token_delay", "must not be negative")
	}
	if o.failAfter < 0 {
		v = v.Add("fail_after_tokens", "must not be negative")
	}
	switch {
	case o.crashAfter < 0:
		v = v.Add("crash_after_tokens", "must not be negative")
	case o.crashAfter > 0 && crashFault.Load() == nil:
		v = v.Add("crash_after_tokens", "is a test fault that ends the process; kerneld accepts it only when started "+
			"with KERNELD_TEST_FAULTS=crash in its environment")
	}
	if len(o.steps) == 0 {
		v = v.Add("script", "required: at least one step")
	}
	for i, st := range o.steps {
		if st.text == "" && st.reasoning == "" && len(st.calls) == 0 {
			v = v.Add(fmt.Sprintf("script[%d]", i), "needs text, reasoning or tool_calls")
		}
		for j, tc := range st.calls {
			if tc.name == "" {
				v = v.Add(fmt.Sprintf("script[%d].tool_calls[%d].name", i, j), "required")
			}
		}
	}
	return v.Err()
}

// decodeSteps decodes the script list.
func decodeSteps(path string, n *yaml.Node, steps *[]step) error {
	if n.Kind != yaml.SequenceNode {
		return errdefs.Invalid(path, "must be a list of steps")
	}
	*steps = make([]step, len(n.Content))
	for i, item := range n.Content {
		st := &(*steps)[i]
		err := decodeMapping(fmt.Sprintf("%s[%d]", path, i), item, map[string]fieldFunc{
			"text":        valueField(&st.text),
			"reasoning":   valueField(&st.reasoning),
			"tool_calls":  func(p string, n *yaml.Node) error { return decodeCalls(p, n, &st.calls) },
			"when_result": func(p string, n *yaml.Node) error { return decodeWhenResult(p, n, &st.whenResult) },
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeCalls decodes one step's tool_calls list.
func decodeCalls(path string, n *yaml.Node, calls *[]toolCall) error {
	if n.Kind != yaml.SequenceNode {
		return errdefs.Invalid(path, "must be a list of tool calls")
	}
	*calls = make([]toolCall, len(n.Content))
	for i, item := range n.Content {
		tc := &(*calls)[i]
		tc.args = "{}"
		err := decodeMapping(fmt.Sprintf("%s[%d]", path, i), item, map[string]fieldFunc{
			"name":      valueField(&tc.name),
			"arguments": argumentsField(&tc.args),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeWhenResult decodes one step's when_result list, or replies.
func decodeWhenResult(path string, n *yaml.Node, out *[]resultText) error {
	if n.Kind != yaml.SequenceNode {
		return errdefs.Invalid(path, "must be a list of {starts_with, text}")
	}
	*out = make([]resultText, len(n.Content))
	for i, item := range n.Content {
		rt := &(*out)[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		err := decodeMapping(p, item, map[string]fieldFunc{
			"starts_with": valueField(&rt.prefix),
			"text":        valueField(&rt.text),
		})
		if err != nil {
			return err
		}
		if rt.prefix == "" || rt.text == "" {
			return errdefs.Invalid(p, "needs starts_with and text")
		}
	}
	return nil
}

// decodeMapping calls fields[key] for every key of the mapping n. A key
// without an entry is an unknown option, which is an error rather than
// something to ignore: a typo would otherwise silently change the script.
func decodeMapping(path string, n *yaml.Node, fields map[string]fieldFunc) error {
	if n.Kind != yaml.MappingNode {
		return errdefs.Invalid(orRoot(path), "must be a mapping")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		p := key
		if path != "" {
			p = path + "." + key
		}
		f, ok := fields[key]
		if !ok {
			return errdefs.Invalid(p, "unknown field")
		}
		if err := f(p, n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// valueField decodes a plain YAML value into dst.
func valueField(dst any) fieldFunc {
	return func(path string, n *yaml.Node) error {
		if err := n.Decode(dst); err != nil {
			return errdefs.Invalid(path, llm.YAMLProblem(err))
		}
		return nil
	}
}

// durationField decodes a Go duration string such as "20ms". A bare 0 is
// accepted too, since time.ParseDuration accepts it.
func durationField(dst *time.Duration) fieldFunc {
	return func(path string, n *yaml.Node) error {
		d, err := time.ParseDuration(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			return errdefs.Invalid(path, fmt.Sprintf("must be a duration such as 20ms, got %q", n.Value))
		}
		*dst = d
		return nil
	}
}

// argumentsField decodes any YAML value and stores it as JSON text; null
// counts as the empty object, like an absent arguments field.
func argumentsField(dst *string) fieldFunc {
	return func(path string, n *yaml.Node) error {
		var v any
		if err := n.Decode(&v); err != nil {
			return errdefs.Invalid(path, llm.YAMLProblem(err))
		}
		if v == nil {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return errdefs.Invalid(path, "cannot be written as JSON: "+err.Error())
		}
		*dst = string(b)
		return nil
	}
}

// orRoot names the options block itself when path is empty.
func orRoot(path string) string {
	if path == "" {
		return "model"
	}
	return path
}
