// Package anthropic is the llm.Provider for Anthropic's Messages API. It
// streams through the official anthropic-sdk-go and maps kerneld's
// requests and chunks to that wire format: text, tool use, extended
// thinking and usage.
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

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// providerName prefixes every error, so a client knows which API failed.
const providerName = "anthropic"

// defaultMaxTokens is max_tokens when the agent sets none; the Messages
// API requires one.
const defaultMaxTokens = 4096

// minThinkingBudget is the smallest budget_tokens the API accepts.
const minThinkingBudget = 1024

// Client streams messages for one agent's model block. Its configuration
// is immutable after New and it is safe for concurrent use.
type Client struct {
	messages       anthropic.MessageService
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
	return &Client{
		messages:       anthropic.NewClient(clientOptions(cfg)...).Messages,
		model:          cfg.Name,
		temperature:    cfg.Temperature,
		maxTokens:      maxTokens,
		thinkingBudget: budget,
		apiKey:         cfg.APIKey,
		policy:         policy,
		thinking:       newThinkingCache(thinkingCacheSize),
	}, nil
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

// clientOptions configures the SDK from the model block alone, without
// the ANTHROPIC_* variables and profile files the SDK would otherwise read.
// The SDK's own retries are off; llm.CallPolicy retries, and only before
// output started.
func clientOptions(cfg llm.ModelConfig) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(&http.Client{}),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return opts
}

// Stream implements llm.Provider: it sends req as one streamed message and
// emits its thinking, text, tool-use pieces and, last, its usage.
func (c *Client) Stream(ctx context.Context, req llm.Request, emit func(llm.Chunk) error) error {
	params, err := c.params(req)
	if err != nil {
		return err
	}
	return c.policy.Do(ctx, providerName, emit, func(ctx context.Context, emit func(llm.Chunk) error) error {
		return c.attempt(ctx, params, emit)
	})
}

// attempt sends the request once and reads its stream to the end.
func (c *Client) attempt(ctx context.Context, params anthropic.MessageNewParams, emit func(llm.Chunk) error) error {
	r := newReader(emit)
	if err := llm.ReadEvents(ctx, c.messages.NewStreaming(ctx, params), r.event, c.classify); err != nil {
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
