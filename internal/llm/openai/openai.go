// Package openai is the llm.Provider for OpenAI's Chat Completions API and
// the servers that speak it: with base_url set, Ollama, vLLM, the llama.cpp
// server, LM Studio and others. It streams through the official openai-go
// SDK and maps kerneld's requests and chunks to that wire format.
//
// It owns that mapping and nothing else: it must not know about sessions,
// events or how tools run, and the errors it returns must be safe to show a
// client (never the API key, never a raw response body). Retries and
// timeouts follow llm.CallPolicy, shared with llm/anthropic.
package openai

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// providerName prefixes every error, so a client knows which API failed.
const providerName = "openai"

// Client streams chat completions for one agent's model block. It is
// immutable after New and safe for concurrent use.
type Client struct {
	chat        openai.ChatCompletionService
	model       string
	temperature *float64
	maxTokens   int
	// compatible is true for a base_url other than OpenAI's own: such
	// servers know max_tokens, while OpenAI deprecated it and its
	// reasoning models accept only max_completion_tokens.
	compatible bool
	apiKey     string // scrubbed from error messages
	policy     llm.CallPolicy
}

var _ llm.Provider = (*Client)(nil)

// New builds a Client from an agent's model block; it is an llm.Factory.
// The model name is required. Without a base_url the client talks to
// OpenAI and needs an api_key: when it is empty New returns an error of
// kind errdefs.ErrUnavailable, which lists the agent as unavailable rather
// than failing startup. With a base_url the key is optional, since local
// servers need none. The options are:
//
//	timeout: 120s      # per attempt: the request and its whole stream
//	max_retries: 3     # on 429, 5xx and connection errors, before any output
func New(cfg llm.ModelConfig) (llm.Provider, error) {
	if strings.TrimSpace(cfg.Name) == "" {
		return nil, errdefs.Invalid("name", "required")
	}
	policy, err := llm.DecodeOptions(cfg.Options, nil)
	if err != nil {
		return nil, err
	}
	if err := llm.CheckBaseURL(cfg.BaseURL, "http://localhost:11434/v1"); err != nil {
		return nil, err
	}
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, llm.MissingAPIKey("model.base_url")
	}
	return &Client{
		chat:        openai.NewChatCompletionService(clientOptions(cfg)...),
		model:       cfg.Name,
		temperature: cfg.Temperature,
		maxTokens:   cfg.MaxTokens,
		compatible:  isCompatible(cfg.BaseURL),
		apiKey:      cfg.APIKey,
		policy:      policy,
	}, nil
}

// clientOptions configures the SDK from the model block alone: the
// service is built without openai.NewClient, so OPENAI_* variables of the
// process cannot override the agent file. The SDK's own retries are off;
// llm.CallPolicy retries, and only before output started.
func clientOptions(cfg llm.ModelConfig) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithHTTPClient(&http.Client{}),
		option.WithEnvironmentProduction(),
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return opts
}

// openaiHost is OpenAI's own API.
const openaiHost = "api.openai.com"

// isCompatible reports whether base_url names a server other than OpenAI.
func isCompatible(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return baseURL != "" && err == nil && u.Hostname() != openaiHost
}

// Stream implements llm.Provider: it sends req as one streamed chat
// completion and emits its reasoning, text, tool-call pieces and, last,
// its usage.
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
func (c *Client) attempt(ctx context.Context, params openai.ChatCompletionNewParams, emit func(llm.Chunk) error) error {
	var rec responseRecord
	stream := c.chat.NewStreaming(ctx, params, option.WithMiddleware(rec.middleware))
	r := newReader(emit)
	classify := func(err error) error { return c.classify(err, &rec) }
	if err := llm.ReadEvents(ctx, stream, r.chunk, classify); err != nil {
		return err
	}
	if rec.notStream != nil && r.empty() {
		return c.notStreamError(&rec)
	}
	return r.end()
}

// modelFor returns the model a request names, or the agent's.
func (c *Client) modelFor(req llm.Request) string {
	return cmp.Or(req.Model, c.model)
}

// errorf returns an error prefixed with the provider's name.
func errorf(format string, args ...any) error {
	return fmt.Errorf(providerName+": "+format, args...)
}
