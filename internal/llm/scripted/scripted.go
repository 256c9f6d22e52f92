// Package scripted is kerneld's deterministic built-in model: it streams
// text, reasoning and tool calls from a script in the agent file, with no
// network. The demo agent, tests, benchmarks and fault injection use it.
//
// It owns the script format (the provider-specific members of an agent's
// `model:` block) and nothing else: it must not know about sessions, tools
// or HTTP, and it must behave the same on every run given the same request.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kerneld/kerneld/internal/llm"
)

// inputPlaceholder is replaced by the run's input in text and reasoning.
const inputPlaceholder = "{input}"

// Model is a scripted llm.Provider. It is immutable after New, so one Model
// serves any number of concurrent runs.
type Model struct {
	opts options
}

var _ llm.Provider = (*Model)(nil)

// New builds a Model from the provider-specific options of cfg. It is an
// llm.Factory; errors match errdefs.ErrInvalid and name the offending
// option, e.g. "script[1].tool_calls[0].name". The options are:
//
//	token_delay: 20ms        # pause before each streamed token; default 0
//	script:                  # one step per model call of a run; the last repeats
//	  - reasoning: "..."     # streamed word by word before the text
//	    text: "You said: {input}"
//	    tool_calls: [{name: current_time, arguments: {}}]
//	    when_result:         # text instead, if the last tool result starts so
//	      - {starts_with: "denied", text: "Not saved."}
//	error: "boom"            # fail every call with this message ...
//	fail_after_tokens: 3     # ... after this many text and reasoning tokens
//	replies:                 # a run whose input starts so gets this text alone
//	  - {starts_with: "[child_result]", text: "Noted."}
//	summary: "They chatted." # the answer to a compaction summary request
//	summary_error: "boom"    # fail summary requests with this message
//	crash_after_tokens: 5    # end the process after this many tokens of every call;
//	                         # a test fault, refused unless EnableCrashFaults was called
//
// Options may also be built in Go (e.g. a time.Duration for token_delay):
// anything that encodes to that YAML shape is accepted.
func New(cfg llm.ModelConfig) (llm.Provider, error) {
	opts, err := decodeOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	return &Model{opts: opts}, nil
}

// Stream plays the step for req.Turn: reasoning, then text, then tool calls,
// then usage. The last step repeats for turns past the end of the script.
func (m *Model) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	if req.Purpose == llm.PurposeSummary {
		return m.summarise(ctx, req, emit)
	}
	st := m.opts.steps[min(max(req.Turn, 0), len(m.opts.steps)-1)]
	if text, ok := m.opts.reply(req.RunInput); ok {
		st = step{text: text}
	}
	c := &call{ctx: ctx, emit: emit, opts: &m.opts}
	if err := c.words(expand(st.reasoning, req.RunInput), reasoningChunk); err != nil {
		return err
	}
	if err := c.words(expand(st.textFor(req.Messages), req.RunInput), textChunk); err != nil {
		return err
	}
	if m.opts.errMsg != "" {
		// The failure point lies beyond this step's tokens; fail anyway so
		// an `error:` always fails the call, never only sometimes.
		return errors.New(m.opts.errMsg)
	}
	for i, tc := range st.calls {
		tc.args = expandJSON(tc.args, req.RunInput)
		if err := c.toolCall(i, tc); err != nil {
			return err
		}
	}
	return c.send(llm.Chunk{Usage: &llm.Usage{InputTokens: inputWords(req), OutputTokens: c.out}})
}

// reply returns the text of the first reply whose prefix starts input.
func (o *options) reply(input string) (string, bool) {
	for _, r := range o.replies {
		if strings.HasPrefix(input, r.prefix) {
			return r.text, true
		}
	}
	return "", false
}

// textFor returns the step's text for a call that sees msgs: the text of
// its first when_result entry whose prefix starts the last tool result,
// or its text.
func (st step) textFor(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0 && len(st.whenResult) > 0; i-- {
		if msgs[i].Role != llm.RoleTool {
			continue
		}
		for _, rt := range st.whenResult {
			if strings.HasPrefix(msgs[i].Content, rt.prefix) {
				return rt.text
			}
		}
		break
	}
	return st.text
}

// defaultSummary answers a summary request when the script gives none.
const defaultSummary = "(summary of the earlier conversation)"

// summarise answers a compaction summary request: the summary option
// (default defaultSummary), or the summary_error failure. Like every
// answer it fails as the error option says.
func (m *Model) summarise(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	if m.opts.summaryErr != "" {
		return errors.New(m.opts.summaryErr)
	}
	c := &call{ctx: ctx, emit: emit, opts: &m.opts}
	text := m.opts.summary
	if text == "" {
		text = defaultSummary
	}
	if err := c.words(expand(text, req.RunInput), textChunk); err != nil {
		return err
	}
	if m.opts.errMsg != "" {
		return errors.New(m.opts.errMsg)
	}
	return c.send(llm.Chunk{Usage: &llm.Usage{InputTokens: inputWords(req), OutputTokens: c.out}})
}

// call is the state of one Stream call.
type call struct {
	ctx    context.Context
	emit   func(llm.Chunk) error
	opts   *options
	tokens int   // text and reasoning tokens streamed so far, for fail_after_tokens
	out    int64 // output tokens for Usage, counting each tool call as one
}

func textChunk(s string) llm.Chunk      { return llm.Chunk{Text: s} }
func reasoningChunk(s string) llm.Chunk { return llm.Chunk{Reasoning: s} }

// words streams s token by token, pausing token_delay before each and
// failing with the scripted error once fail_after_tokens is reached.
func (c *call) words(s string, chunk func(string) llm.Chunk) error {
	for _, tok := range tokenize(s) {
		if c.opts.errMsg != "" && c.tokens >= c.opts.failAfter {
			return errors.New(c.opts.errMsg)
		}
		if err := llm.Sleep(c.ctx, c.opts.tokenDelay); err != nil {
			return err
		}
		if err := c.send(chunk(tok)); err != nil {
			return err
		}
		c.tokens++
		c.out++
		if c.opts.crashAfter > 0 && c.tokens == c.opts.crashAfter {
			crashNow()
		}
	}
	return nil
}

// toolCall streams call i as a header chunk and two argument fragments, so
// consumers exercise the same delta reassembly real providers need, each
// after token_delay as a real model's would arrive. The ID stays empty
// because the kernel assigns tool call ids.
func (c *call) toolCall(i int, tc toolCall) error {
	chunks := []llm.Chunk{{ToolCall: &llm.ToolCallDelta{Index: i, Name: tc.name}}}
	for _, frag := range halves(tc.args) {
		chunks = append(chunks, llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: frag}})
	}
	for _, ch := range chunks {
		if err := llm.Sleep(c.ctx, c.opts.tokenDelay); err != nil {
			return err
		}
		if err := c.send(ch); err != nil {
			return err
		}
	}
	c.out++
	return nil
}

// send emits ch unless ctx has ended.
func (c *call) send(ch llm.Chunk) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	return c.emit(ch)
}

// expandJSON replaces every {input} in the JSON text args with input,
// escaped for a JSON string: {input} only ever stands inside one.
func expandJSON(args, input string) string {
	if !strings.Contains(args, inputPlaceholder) {
		return args
	}
	quoted, _ := json.Marshal(input) // a string always marshals
	return strings.ReplaceAll(args, inputPlaceholder, string(quoted[1:len(quoted)-1]))
}

// expand replaces every {input} in s with input.
func expand(s, input string) string {
	return strings.ReplaceAll(s, inputPlaceholder, input)
}

// tokenize splits s into words, each carrying the whitespace before it;
// whitespace after the last word joins the last token. Joining the tokens
// gives s back exactly and no token is empty.
func tokenize(s string) []string {
	var toks []string
	start, prevSpace := 0, true
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && !prevSpace {
			toks = append(toks, s[start:i])
			start = i
		}
		prevSpace = space
	}
	if rest := s[start:]; rest != "" {
		if len(toks) > 0 && strings.TrimSpace(rest) == "" {
			toks[len(toks)-1] += rest
		} else {
			toks = append(toks, rest)
		}
	}
	return toks
}

// halves splits s near its middle on a rune boundary, so each fragment is
// valid UTF-8 on its own. Strings too short to split come back whole.
func halves(s string) []string {
	if s == "" {
		return nil
	}
	mid := len(s) / 2
	for mid < len(s) && !utf8.RuneStart(s[mid]) {
		mid++
	}
	if mid == 0 || mid == len(s) {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}

// inputWords approximates the input token count as the number of words in
// the system prompt and the messages' content.
func inputWords(req llm.Request) int64 {
	n := len(strings.Fields(req.System))
	for _, msg := range req.Messages {
		n += len(strings.Fields(msg.Content))
	}
	return int64(n)
}
