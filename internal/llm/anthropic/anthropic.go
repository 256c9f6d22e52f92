// Package anthropic is the llm.Provider for Anthropic's Messages API. It
// sends one streamed request per attempt (POST {base_url}/v1/messages
// with "stream": true) with net/http and reads the events of its stream,
// mapping kerneld's requests and chunks to that wire format: text, tool
// use, extended thinking and usage.
//
// It owns that mapping and nothing else: it must not know about sessions,
// events or how tools run, and the errors it returns must be safe to show a
// client (never the API key, never a raw response body). Retries and
// timeouts follow llm.CallPolicy, shared with llm/openai.
package anthropic

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// providerName prefixes every error, so a client knows which API failed.
const providerName = "anthropic"

// defaultBaseURL is Anthropic's API, used when the agent sets no base_url.
const defaultBaseURL = "https://api.anthropic.com"

// apiVersion is the version of the Messages API kerneld speaks.
const apiVersion = "2023-06-01"

// defaultMaxTokens is max_tokens when the agent sets none; the Messages
// API requires one.
const defaultMaxTokens = 4096

// minThinkingBudget is the smallest budget_tokens the API accepts.
const minThinkingBudget = 1024

// Client streams messages for one agent's model block. Its configuration
// is immutable after New and it is safe for concurrent use.
type Client struct {
	endpoint       *llm.Endpoint // {base_url}/v1/messages
	model          string
	temperature    *float64
	maxTokens      int
	thinkingBudget int    // 0: extended thinking off
	apiKey         string // scrubbed from error messages
	policy         llm.CallPolicy
	// thinking keeps the signed thinking blocks of responses that called
	// tools, which the API requires back with the tool results.
	thinking *thinkingCache
}

var _ llm.Provider = (*Client)(nil)

// New builds a Client from an agent's model block; it is an llm.Factory.
// The model name is required; an empty api_key is an error of kind
// errdefs.ErrUnavailable, which lists the agent as unavailable rather than
// failing startup. max_tokens defaults to 4096. The options are:
//
//	timeout: 120s          # per attempt: the request and its whole stream
//	max_retries: 3         # on 429, 5xx, overload and connection errors, before any output
//	thinking_budget: 2048  # enable extended thinking with this many tokens (>= 1024, < max_tokens)
//
// The client reads nothing from the environment (no ANTHROPIC_* variables):
// the agent file alone configures it.
func New(cfg llm.ModelConfig) (llm.Provider, error) {
	if strings.TrimSpace(cfg.Name) == "" {
		return nil, errdefs.Invalid("name", "required")
	}
	var budget int
	policy, err := llm.DecodeOptions(cfg.Options, map[string]any{"thinking_budget": &budget})
	if err != nil {
		return nil, err
	}
	maxTokens := cmp.Or(cfg.MaxTokens, defaultMaxTokens)
	if err := checkThinking(budget, maxTokens, cfg.Temperature); err != nil {
		return nil, err
	}
	if err := llm.CheckBaseURL(cfg.BaseURL, "https://api.anthropic.com"); err != nil {
		return nil, err
	}
	if cfg.APIKey == "" {
		return nil, llm.MissingAPIKey("")
	}
	c := &Client{
		model:          cfg.Name,
		temperature:    cfg.Temperature,
		maxTokens:      maxTokens,
		thinkingBudget: budget,
		apiKey:         cfg.APIKey,
		policy:         policy,
		thinking:       newThinkingCache(thinkingCacheSize),
	}
	c.endpoint = &llm.Endpoint{
		Provider: providerName,
		URL:      strings.TrimRight(cmp.Or(cfg.BaseURL, defaultBaseURL), "/") + "/v1/messages",
		Header: http.Header{
			"Content-Type":      {"application/json"},
			"Accept":            {"text/event-stream"},
			"X-Api-Key":         {cfg.APIKey},
			"Anthropic-Version": {apiVersion},
		},
		Client:       &http.Client{},
		Secret:       cfg.APIKey,
		ErrorMessage: errorMessage,
		StreamError:  c.streamError,
		Expected:     "the Messages API (https://api.anthropic.com or a proxy of it)",
	}
	return c, nil
}

// checkThinking validates thinking_budget against the API's rules: at
// least 1024, below max_tokens, and no custom temperature alongside.
func checkThinking(budget, maxTokens int, temperature *float64) error {
	switch {
	case budget == 0:
		return nil
	case budget < minThinkingBudget:
		return errdefs.Invalid("thinking_budget", fmt.Sprintf("must be at least %d", minThinkingBudget))
	case budget >= maxTokens:
		return errdefs.Invalid("thinking_budget", fmt.Sprintf("must be less than max_tokens (%d)", maxTokens))
	case temperature != nil:
		return errdefs.Invalid("thinking_budget", "cannot be combined with temperature: extended thinking uses the default")
	}
	return nil
}

// Stream implements llm.Provider: it sends req as one streamed message and
// emits its thinking, text, tool-use pieces and, last, its usage. A
// success that is not labelled an event stream is read as one all the
// same, and explained when it held no event.
func (c *Client) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	body, err := c.body(req)
	if err != nil {
		return err
	}
	return c.policy.Do(ctx, providerName, emit, func(ctx context.Context, emit func(llm.Chunk) error) error {
		return c.attempt(ctx, body, emit)
	})
}

// attempt sends the request once and reads its stream to the end.
func (c *Client) attempt(ctx context.Context, body []byte, emit func(llm.Chunk) error) error {
	r := newReader(emit, c.streamError)
	if err := c.endpoint.Stream(ctx, body, r.event); err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	c.thinking.put(r.toolIDs, r.thinkingBlocks)
	return nil
}

// errorf returns an error prefixed with the provider's name.
func errorf(format string, args ...any) error {
	return fmt.Errorf(providerName+": "+format, args...)
}
