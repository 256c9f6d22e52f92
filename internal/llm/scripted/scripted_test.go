package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
	"github.com/kerneld/kerneld/internal/llm/scripted"
)

// mustNew builds a scripted model from the YAML text of its options, the
// way an agent file's model block reaches the factory.
func mustNew(tb testing.TB, opts string) llm.Provider {
	tb.Helper()
	p, err := scripted.New(llm.ModelConfig{Provider: "scripted", Options: options(tb, opts)})
	require.NoError(tb, err)
	return p
}

// options decodes YAML text into the map llm.ModelConfig.Options carries.
func options(tb testing.TB, text string) map[string]any {
	tb.Helper()
	var m map[string]any
	require.NoError(tb, yaml.Unmarshal([]byte(text), &m))
	return m
}

// stream runs one call and returns every chunk emitted before it ended.
func stream(ctx context.Context, p llm.Provider, req llm.Request) ([]llm.Chunk, error) {
	var got []llm.Chunk
	err := p.Stream(ctx, req, func(c llm.Chunk) error {
		got = append(got, c)
		return nil
	})
	return got, err
}

// texts returns the Text of every chunk that has some.
func texts(chunks []llm.Chunk) []string {
	var out []string
	for _, c := range chunks {
		if c.Text != "" {
			out = append(out, c.Text)
		}
	}
	return out
}

func TestModel_StreamTokenizes(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"words", "You said: hi there", []string{"You", " said:", " hi", " there"}},
		{"empty", "", nil},
		{"one word", "hello", []string{"hello"}},
		{"leading spaces", "  hi there", []string{"  hi", " there"}},
		{"trailing spaces", "hi there  ", []string{"hi", " there  "}},
		{"multiple spaces", "a   b", []string{"a", "   b"}},
		{"newlines and tabs", "line one\n\n\tline two\n", []string{"line", " one", "\n\n\tline", " two\n"}},
		{"only whitespace", " \n ", []string{" \n "}},
		{"unicode", "héllo wörld ✓", []string{"héllo", " wörld", " ✓"}},
	}
	p := mustNew(t, "script: [{text: '{input}'}]")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := stream(t.Context(), p, llm.Request{RunInput: tt.input})
			require.NoError(t, err)
			got := texts(chunks)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.input, strings.Join(got, ""), "tokens must join back to the text")
			for _, c := range chunks[:len(chunks)-1] {
				assert.True(t, c.Text != "", "every chunk before usage is non-empty text: %+v", c)
			}
		})
	}
}

func TestModel_StreamSubstitutesInput(t *testing.T) {
	p := mustNew(t, `script: [{text: "You said: {input} ({input})", reasoning: "about {input}"}]`)
	chunks, err := stream(t.Context(), p, llm.Request{RunInput: "hi there"})
	require.NoError(t, err)
	assert.Equal(t, "You said: hi there (hi there)", strings.Join(texts(chunks), ""))
	assert.Equal(t, "about hi there", joinReasoning(chunks))
}

func TestModel_StreamStepPerTurn(t *testing.T) {
	p := mustNew(t, "script: [{text: first}, {text: second}, {text: last}]")
	tests := []struct {
		turn int
		want string
	}{{0, "first"}, {1, "second"}, {2, "last"}, {3, "last"}, {100, "last"}, {-1, "first"}}
	for _, tt := range tests {
		chunks, err := stream(t.Context(), p, llm.Request{Turn: tt.turn})
		require.NoError(t, err)
		assert.Equal(t, tt.want, strings.Join(texts(chunks), ""), "turn %d", tt.turn)
	}
}

func TestModel_StreamToolCalls(t *testing.T) {
	p := mustNew(t, `
script:
  - text: Let me check.
    tool_calls:
      - name: current_time
      - name: memory_set
        arguments: {key: greeting, value: {text: "héllo ✓", n: [1, 2]}}
      - name: raw
        arguments: 7`)
	chunks, err := stream(t.Context(), p, llm.Request{})
	require.NoError(t, err)
	assert.Equal(t, "Let me check.", strings.Join(texts(chunks), ""))

	calls := reassemble(t, chunks)
	require.Len(t, calls, 3)
	assert.Equal(t, "current_time", calls[0].name)
	assert.JSONEq(t, `{}`, calls[0].args)
	assert.Equal(t, "memory_set", calls[1].name)
	assert.JSONEq(t, `{"key":"greeting","value":{"text":"héllo ✓","n":[1,2]}}`, calls[1].args)
	assert.Equal(t, []int{2, 2, 1}, []int{calls[0].fragments, calls[1].fragments, calls[2].fragments},
		"arguments of two bytes or more arrive in two fragments")
	assert.Equal(t, "7", calls[2].args)
}

// reassembled is a tool call put back together from its deltas.
type reassembled struct {
	name      string
	args      string
	fragments int
}

// reassemble rebuilds tool calls from chunks the way the kernel must,
// checking the delta contract on the way.
func reassemble(tb testing.TB, chunks []llm.Chunk) []reassembled {
	tb.Helper()
	var calls []reassembled
	for _, c := range chunks {
		d := c.ToolCall
		if d == nil {
			continue
		}
		assert.Empty(tb, d.ID, "the kernel assigns tool call ids")
		if d.Name != "" {
			require.Equal(tb, len(calls), d.Index, "a new call takes the next index")
			calls = append(calls, reassembled{name: d.Name})
			continue
		}
		require.Equal(tb, len(calls)-1, d.Index, "fragments belong to the current call")
		assert.NotEmpty(tb, d.Arguments)
		assert.True(tb, utf8.ValidString(d.Arguments), "fragment %q is valid UTF-8", d.Arguments)
		calls[d.Index].args += d.Arguments
		calls[d.Index].fragments++
	}
	for _, c := range calls {
		assert.True(tb, json.Valid([]byte(c.args)), "arguments %q are valid JSON", c.args)
	}
	return calls
}

func TestModel_StreamReasoningBeforeText(t *testing.T) {
	p := mustNew(t, `script: [{reasoning: "thinking it over", text: "Done."}]`)
	chunks, err := stream(t.Context(), p, llm.Request{})
	require.NoError(t, err)
	require.Len(t, chunks, 5)
	assert.Equal(t, []llm.Chunk{{Reasoning: "thinking"}, {Reasoning: " it"}, {Reasoning: " over"}, {Text: "Done."}},
		chunks[:4])
}

func TestModel_StreamFails(t *testing.T) {
	tests := []struct {
		name  string
		opts  string
		wantN int // chunks before the error
	}{
		{"before any token", "{script: [{text: a b c}], error: boom}", 0},
		{"after two text tokens", "{script: [{text: a b c}], error: boom, fail_after_tokens: 2}", 2},
		{"counting reasoning", "{script: [{reasoning: r1 r2, text: t1 t2}], error: boom, fail_after_tokens: 3}", 3},
		{"past the last token", "{script: [{text: a, tool_calls: [{name: x}]}], error: boom, fail_after_tokens: 9}", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := stream(t.Context(), mustNew(t, tt.opts), llm.Request{})
			require.EqualError(t, err, "boom")
			assert.Len(t, chunks, tt.wantN)
			for _, c := range chunks {
				assert.Nil(t, c.ToolCall, "a failing call emits no tool calls")
				assert.Nil(t, c.Usage, "a failing call emits no usage")
			}
		})
	}
}

// TestModel_CrashFault: crash_after_tokens is refused while crash faults
// are off, and once they are on, every call crashes (here: records) after
// that many tokens.
func TestModel_CrashFault(t *testing.T) {
	const opts = "{script: [{reasoning: r1, text: t1 t2 t3}], crash_after_tokens: 3}"
	_, err := scripted.New(llm.ModelConfig{Provider: "scripted", Options: options(t, opts)})
	require.ErrorIs(t, err, errdefs.ErrInvalid)
	assert.Contains(t, err.Error(), "KERNELD_TEST_FAULTS=crash")

	var crashes []int
	var chunks []llm.Chunk
	scripted.EnableCrashFaults(func() { crashes = append(crashes, len(chunks)) })
	t.Cleanup(func() { scripted.EnableCrashFaults(nil) })
	p := mustNew(t, opts)
	for range 2 {
		chunks = nil
		err := p.Stream(t.Context(), llm.Request{}, func(c llm.Chunk) error {
			chunks = append(chunks, c)
			return nil
		})
		require.NoError(t, err, "a crash that does not end the process lets the call go on")
	}
	assert.Equal(t, []int{3, 3}, crashes, "each call crashes after its third token")
}

func TestModel_StreamTokenDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, "{token_delay: 20ms, script: [{text: one two three}]}")
		start := time.Now()
		_, err := stream(t.Context(), p, llm.Request{})
		require.NoError(t, err)
		assert.Equal(t, 60*time.Millisecond, time.Since(start), "one delay before each of three tokens")
	})
}

func TestModel_StreamCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustNew(t, "{token_delay: 1h, script: [{text: never arrives}]}")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		chunks, err := stream(ctx, p, llm.Request{})
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, chunks)
		assert.Equal(t, 20*time.Millisecond, time.Since(start), "cancellation must not wait out the delay")
	})
}

func TestModel_StreamStopsOnEmitError(t *testing.T) {
	errStop := errors.New("subscriber gone")
	p := mustNew(t, "script: [{text: a b c d}]")
	calls := 0
	err := p.Stream(t.Context(), llm.Request{}, func(llm.Chunk) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	require.ErrorIs(t, err, errStop)
	assert.Equal(t, 2, calls)
}

func TestModel_StreamUsage(t *testing.T) {
	p := mustNew(t, "script: [{reasoning: hmm, text: two words, tool_calls: [{name: a}, {name: b}]}]")
	req := llm.Request{
		System: "You are  helpful.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "hello there"},
			{Role: llm.RoleAssistant},
			{Role: llm.RoleTool, Content: "a b\nc"},
		},
	}
	chunks, err := stream(t.Context(), p, req)
	require.NoError(t, err)
	last := chunks[len(chunks)-1]
	require.NotNil(t, last.Usage, "usage comes last")
	assert.Equal(t, llm.Usage{InputTokens: 8, OutputTokens: 5}, *last.Usage)
}

func TestModel_StreamConcurrent(t *testing.T) {
	p := mustNew(t, "script: [{text: 'echo {input}', tool_calls: [{name: t, arguments: {a: 1}}]}]")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			input := strings.Repeat("x", i+1)
			chunks, err := stream(t.Context(), p, llm.Request{RunInput: input})
			assert.NoError(t, err)
			assert.Equal(t, "echo "+input, strings.Join(texts(chunks), ""))
		})
	}
	wg.Wait()
}

func TestNew_Rejects(t *testing.T) {
	tests := []struct {
		name string
		opts string
		want string
	}{
		{"unknown option", "{scripts: [{text: hi}]}", "scripts: unknown field"},
		{"unknown step field", "{script: [{txt: hi}]}", "script[0].txt: unknown field"},
		{"unknown tool call field", "{script: [{tool_calls: [{nme: x}]}]}", "script[0].tool_calls[0].nme: unknown field"},
		{"missing script", "{token_delay: 1s}", "script: required"},
		{"empty script", "{script: []}", "script: required"},
		{"script not a list", "{script: hello}", "script: must be a list"},
		{"empty step", "{script: [{text: hi}, {text: ''}]}", "script[1]: needs text, reasoning or tool_calls"},
		{"tool call without name", "{script: [{text: a}, {tool_calls: [{arguments: {}}]}]}", "script[1].tool_calls[0].name: required"},
		{"negative delay", "{token_delay: -1s, script: [{text: hi}]}", "token_delay: must not be negative"},
		{"bad delay", "{token_delay: soon, script: [{text: hi}]}", `token_delay: must be a duration such as 20ms, got "soon"`},
		{"negative fail point", "{fail_after_tokens: -1, script: [{text: hi}]}", "fail_after_tokens: must not be negative"},
		{"mistyped fail point", "{fail_after_tokens: many, script: [{text: hi}]}", "fail_after_tokens: cannot unmarshal"},
		{"mistyped text", "{script: [{text: {a: 1}}]}", "script[0].text: cannot unmarshal !!map into string"},
		{"when_result not a list", "{script: [{text: a, when_result: denied}]}", "script[0].when_result: must be a list"},
		{"when_result without text", "{script: [{text: a, when_result: [{starts_with: denied}]}]}", "script[0].when_result[0]: needs starts_with and text"},
		{"unknown when_result field", "{script: [{text: a, when_result: [{prefix: d, text: b}]}]}", "script[0].when_result[0].prefix: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scripted.New(llm.ModelConfig{Provider: "scripted", Options: options(t, tt.opts)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.ErrorIs(t, err, errdefs.ErrInvalid)
		})
	}
}

func TestNew_AcceptsZeroDelay(t *testing.T) {
	for _, d := range []string{"0", "0s", "20ms"} {
		_, err := scripted.New(llm.ModelConfig{Options: options(t, "{token_delay: "+d+", script: [{text: hi}]}")})
		assert.NoError(t, err, "token_delay %s", d)
	}
}

// joinReasoning concatenates the reasoning chunks.
func joinReasoning(chunks []llm.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Reasoning)
	}
	return b.String()
}

func TestNew_AcceptsGoValues(t *testing.T) {
	p, err := scripted.New(llm.ModelConfig{Options: map[string]any{
		"token_delay": time.Duration(0),
		"script": []map[string]any{{
			"text":       "hi",
			"tool_calls": []map[string]any{{"name": "t", "arguments": map[string]int{"a": 1}}},
		}},
	}})
	require.NoError(t, err)
	chunks, err := stream(t.Context(), p, llm.Request{})
	require.NoError(t, err)
	calls := reassemble(t, chunks)
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"a":1}`, calls[0].args)
}

// TestStream_InputInToolArguments: {input} in a tool call's arguments is
// replaced JSON-escaped, so any input keeps the arguments valid JSON.
func TestStream_InputInToolArguments(t *testing.T) {
	m, err := scripted.New(llm.ModelConfig{Options: map[string]any{
		"script": []any{map[string]any{"tool_calls": []any{map[string]any{"name": "ask", "arguments": map[string]any{"q": "{input}"}}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	err = m.Stream(t.Context(), llm.Request{RunInput: `say "hi"` + "\n\\now"}, func(c llm.Chunk) error {
		if c.ToolCall != nil {
			args.WriteString(c.ToolCall.Arguments)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(args.String()), &got); err != nil || got["q"] != `say "hi"`+"\n\\now" {
		t.Fatalf("arguments %s = %v, %v", args.String(), got, err)
	}
}

// TestModel_StreamSummary: a summary request is answered with the summary
// option, never a script step, and fails with summary_error.
func TestModel_StreamSummary(t *testing.T) {
	req := llm.Request{Purpose: llm.PurposeSummary, RunInput: "x", Turn: 1}
	chunks, err := stream(t.Context(), mustNew(t, `{script: [{text: step one}, {text: step two}], summary: "Said {input}."}`), req)
	require.NoError(t, err)
	assert.Equal(t, "Said x.", strings.Join(texts(chunks), ""))
	assert.NotNil(t, chunks[len(chunks)-1].Usage)

	chunks, err = stream(t.Context(), mustNew(t, `{script: [{text: a}]}`), req)
	require.NoError(t, err)
	assert.Equal(t, "(summary of the earlier conversation)", strings.Join(texts(chunks), ""), "a default summary")

	_, err = stream(t.Context(), mustNew(t, `{script: [{text: a}], summary_error: down}`), req)
	require.EqualError(t, err, "down")
	chunks, err = stream(t.Context(), mustNew(t, `{script: [{text: a}], summary_error: down}`), llm.Request{})
	require.NoError(t, err, "summary_error fails summaries only")
	assert.Equal(t, []string{"a"}, texts(chunks))
}

// A step's when_result picks its text from the last tool result the call
// sees: a script can answer a denial as a model would.
func TestModel_StreamWhenResult(t *testing.T) {
	p := mustNew(t, `script:
  - {text: "Saving.", tool_calls: [{name: memory_set}]}
  - text: "Saved {input}."
    when_result:
      - {starts_with: "denied", text: "Not saved: you said no."}
      - {starts_with: "error", text: "Not saved: it failed."}
`)
	call := func(results ...string) llm.Request {
		msgs := []llm.Message{{Role: llm.RoleUser, Content: "x"}}
		for _, r := range results {
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: "Saving."}, llm.Message{Role: llm.RoleTool, Content: r})
		}
		return llm.Request{Turn: 1, RunInput: "the note", Messages: msgs}
	}
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"approved", call(`{"ok":true}`), "Saved the note."},
		{"denied", call("denied: not now"), "Not saved: you said no."},
		{"failed", call("error: disk full"), "Not saved: it failed."},
		{"the last result counts", call("denied", `{"ok":true}`), "Saved the note."},
		{"no result", llm.Request{Turn: 1, RunInput: "the note"}, "Saved the note."},
	}
	for _, tt := range tests {
		chunks, err := stream(t.Context(), p, tt.req)
		require.NoError(t, err)
		assert.Equal(t, tt.want, strings.Join(texts(chunks), ""), tt.name)
	}
}
