package agents

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kerneld/kerneld/internal/llm"
)

// envRef matches ${NAME}. Only this form is expanded, so a bare $ or $foo
// in a prompt stays as written.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces every ${NAME} inside the scalar values of the tree n
// with getenv(NAME). Expanding values, not the file's text, means a value
// holding ':' or '#' cannot change the file's structure. An unset variable
// becomes empty, which lets optional settings such as base_url fall back
// to the provider's default; unset records which ones, by field path, so
// the loader can name the one an unavailable agent lacks.
func expandEnv(n *yaml.Node, path string, getenv func(string) string, unset map[string][]string) {
	switch n.Kind {
	case yaml.ScalarNode:
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v := getenv(name)
			if v == "" {
				unset[path] = append(unset[path], name)
			}
			return v
		})
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			expandEnv(n.Content[i+1], p, getenv, unset)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			expandEnv(c, path, getenv, unset)
		}
	}
}

// fieldFunc decodes the value n of the field at path.
type fieldFunc func(path string, n *yaml.Node) error

// parse strictly decodes one agent file over the defaults. The file is
// walked as a YAML node tree rather than unmarshalled into a tagged struct
// because the model block mixes fixed keys with provider-specific ones and
// because every error must name the field's full path.
func parse(data []byte, getenv func(string) string) (Spec, error) {
	root, err := document(data)
	if err != nil {
		return Spec{}, err
	}
	s := defaultSpec()
	s.Stream.MergeDeltas = true
	s.unsetEnv = map[string][]string{}
	expandEnv(root, "", getenv, s.unsetEnv)
	err = decodeMapping("", root, map[string]fieldFunc{
		"name":          value(&s.Name),
		"description":   value(&s.Description),
		"model":         func(p string, n *yaml.Node) error { return decodeModel(p, n, &s.Model) },
		"system_prompt": value(&s.SystemPrompt),
		"tools":         func(p string, n *yaml.Node) error { return decodeTools(p, n, &s.Tools) },
		"max_turns":     value(&s.MaxTurns),
		"limits": func(p string, n *yaml.Node) error {
			return decodeMapping(p, n, map[string]fieldFunc{
				"max_children": value(&s.Limits.MaxChildren),
				"max_depth":    value(&s.Limits.MaxDepth),
				"run_timeout":  duration(&s.Limits.RunTimeout),
			})
		},
		"memory": func(p string, n *yaml.Node) error {
			return decodeMapping(p, n, map[string]fieldFunc{
				"max_history_messages": value(&s.Memory.MaxHistoryMessages),
				"compaction":           func(p string, n *yaml.Node) error { return decodeCompaction(p, n, &s.Memory.Compaction) },
			})
		},
		"stream": func(p string, n *yaml.Node) error {
			return decodeMapping(p, n, map[string]fieldFunc{"merge_deltas": value(&s.Stream.MergeDeltas)})
		},
		"mcp_servers":      func(p string, n *yaml.Node) error { return decodeMCPServers(p, n, &s.MCPServers) },
		"approval_timeout": duration(&s.ApprovalTimeout),
		"max_resumes":      value(&s.MaxResumes),
		"on_crash":         value(&s.OnCrash),
		"permission_modes": value(&s.PermissionModes),
		"title_model":      value(&s.TitleModel),
		"child_agents":     value(&s.ChildAgents),
		"child_results":    value(&s.ChildResults),
		"peers":            value(&s.Peers),
		"client_tools": func(p string, n *yaml.Node) error {
			allowed := true
			err := value(&allowed)(p, n)
			s.NoClientTools = !allowed
			return err
		},
		"guard":    func(p string, n *yaml.Node) error { return decodeGuard(p, n, &s.Guard) },
		"webhooks": func(p string, n *yaml.Node) error { return decodeWebhooks(p, n, &s.Webhooks) },
		"overrides": func(p string, n *yaml.Node) error {
			return decodeMapping(p, n, map[string]fieldFunc{
				"models": value(&s.Overrides.Models), "reasoning_effort": value(&s.Overrides.ReasoningEffort),
				"temperature": value(&s.Overrides.Temperature), "max_tokens": value(&s.Overrides.MaxTokens),
			})
		},
	})
	return s, err
}

// decodeCompaction decodes memory.compaction; null leaves it unset.
func decodeCompaction(path string, n *yaml.Node, dst **CompactionPolicy) error {
	if isNull(n) {
		return nil
	}
	c := &CompactionPolicy{}
	*dst = c
	return decodeMapping(path, n, map[string]fieldFunc{
		"at_tokens": value(&c.AtTokens), "at_messages": value(&c.AtMessages), "keep_last": value(&c.KeepLast),
		"model": value(&c.Model), "prompt": value(&c.Prompt),
	})
}

// decodeMCPServers decodes the mcp_servers list.
func decodeMCPServers(path string, n *yaml.Node, servers *[]MCPServer) error {
	items, err := listItems(path, n)
	if err != nil {
		return err
	}
	*servers = make([]MCPServer, len(items))
	for i, item := range items {
		srv := &(*servers)[i]
		srv.CallTimeout = defaultMCPCallTimeout
		err := decodeMapping(fmt.Sprintf("%s[%d]", path, i), item, map[string]fieldFunc{
			"name": value(&srv.Name), "command": value(&srv.Command), "args": value(&srv.Args),
			"env": value(&srv.Env), "url": value(&srv.URL), "headers": value(&srv.Headers),
			"allow": value(&srv.Allow), "call_timeout": duration(&srv.CallTimeout),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// document parses data as exactly one YAML document and returns its root.
// A syntax error keeps yaml's "line N" so the operator can find it.
func document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file")
		}
		return nil, err
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, fmt.Errorf("line %d: more than one YAML document", next.Line)
	case !errors.Is(err, io.EOF):
		return nil, err
	}
	return doc.Content[0], nil
}

// decodeModel decodes the model block: the keys every provider shares go
// to their fields, the rest to Options for the provider's factory.
func decodeModel(path string, n *yaml.Node, m *llm.ModelConfig) error {
	common := map[string]fieldFunc{
		"provider":    value(&m.Provider),
		"name":        value(&m.Name),
		"base_url":    value(&m.BaseURL),
		"api_key":     value(&m.APIKey),
		"temperature": value(&m.Temperature),
		"max_tokens":  value(&m.MaxTokens),
	}
	return eachField(path, n, func(key, v *yaml.Node, p string) error {
		if f, ok := common[key.Value]; ok {
			return f(p, v)
		}
		var opt any
		if err := value(&opt)(p, v); err != nil {
			return err
		}
		if m.Options == nil {
			m.Options = make(map[string]any)
		}
		m.Options[key.Value] = opt
		return nil
	})
}

// decodeTools decodes the tools list; an item is a tool name or a mapping
// with name, require_approval and retry.
func decodeTools(path string, n *yaml.Node, refs *[]ToolRef) error {
	items, err := listItems(path, n)
	if err != nil {
		return err
	}
	*refs = make([]ToolRef, len(items))
	for i, item := range items {
		ref, p := &(*refs)[i], fmt.Sprintf("%s[%d]", path, i)
		if item = deref(item); item.Kind == yaml.ScalarNode {
			if err := value(&ref.Name)(p, item); err != nil {
				return err
			}
			continue
		}
		err := decodeMapping(p, item, map[string]fieldFunc{
			"name":             value(&ref.Name),
			"require_approval": value(&ref.RequireApproval),
			"retry":            value(&ref.Retry),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// listItems returns the items of the list n; none when n is null or
// absent.
func listItems(path string, n *yaml.Node) ([]*yaml.Node, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, problem(path, n, "must be a list")
	}
	return n.Content, nil
}

// decodeMapping calls fields[key] for every key of the mapping n. A key
// without an entry is an error rather than ignored: a misspelt limit
// would otherwise silently fall back to its default.
func decodeMapping(path string, n *yaml.Node, fields map[string]fieldFunc) error {
	return eachField(path, n, func(key, v *yaml.Node, p string) error {
		f, ok := fields[key.Value]
		if !ok {
			return problem(p, key, "unknown field")
		}
		return f(p, v)
	})
}

// eachField calls fn for every key and value of the mapping n with the
// key's full path. A null counts as an empty mapping; duplicate keys are
// errors.
func eachField(path string, n *yaml.Node, fn func(key, v *yaml.Node, path string) error) error {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return problem(orTop(path), n, "must be a mapping")
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		p := key
		if path != "" {
			p = path + "." + key
		}
		if seen[key] {
			return problem(p, n.Content[i], "defined twice")
		}
		seen[key] = true
		if err := fn(n.Content[i], deref(n.Content[i+1]), p); err != nil {
			return err
		}
	}
	return nil
}

// value decodes a plain YAML value into dst.
func value(dst any) fieldFunc {
	return func(path string, n *yaml.Node) error {
		if err := n.Decode(dst); err != nil {
			return problem(path, n, "%s", llm.YAMLProblem(err))
		}
		return nil
	}
}

// duration decodes a Go duration string such as "10m".
func duration(dst *time.Duration) fieldFunc {
	return func(path string, n *yaml.Node) error {
		d, err := time.ParseDuration(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			return problem(path, n, "must be a duration such as 10m, got %q", n.Value)
		}
		*dst = d
		return nil
	}
}

// problem reports what is wrong with the field at path, with n's line.
func problem(path string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s: %s (line %d)", path, fmt.Sprintf(format, args...), n.Line)
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is an empty value, e.g. `limits:` with nothing.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// orTop names the top level of the file when path is empty.
func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
