// Package openai is the llm.Provider for OpenAI's Chat Completions API and
// the servers that speak it: with base_url set, Ollama, vLLM, the llama.cpp
// server, LM Studio and others. It sends one streamed request per attempt
// (POST {base_url}/chat/completions with "stream": true) with net/http and
// reads the chunks of its event stream, mapping kerneld's requests and
// chunks to that wire format.
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

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/llm"
)

// providerName prefixes every error, so a client knows which API failed.
const providerName = "openai"

// defaultBaseURL is OpenAI's own API, used when the agent sets no base_url.
const defaultBaseURL = "https://api.openai.com/v1"

// Client streams chat completions for one agent's model block. It is
// immutable after New and safe for concurrent use.
type Client struct {
	endpoint    *llm.Endpoint // {base_url}/chat/completions
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
//
// The client reads nothing from the environment (no OPENAI_* variables):
// the agent file alone configures it.
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
	c := &Client{
		model:       cfg.Name,
		temperature: cfg.Temperature,
		maxTokens:   cfg.MaxTokens,
		compatible:  isCompatible(cfg.BaseURL),
		apiKey:      cfg.APIKey,
		policy:      policy,
	}
	c.endpoint = &llm.Endpoint{
		Provider:     providerName,
		URL:          strings.TrimRight(cmp.Or(cfg.BaseURL, defaultBaseURL), "/") + "/chat/completions",
		Header:       header(cfg.APIKey),
		Client:       &http.Client{},
		Secret:       cfg.APIKey,
		ErrorMessage: errorMessage,
		StreamError:  c.streamError,
		Expected:     "a Chat Completions API that supports streaming",
	}
	return c, nil
}

// header returns the headers of every request: a bearer token when there
// is a key (local servers need none).
func header(apiKey string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}
	if apiKey != "" {
		h.Set("Authorization", "Bearer "+apiKey)
	}
	return h
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
// its usage. A success that is not labelled an event stream is read as
// one all the same, and explained when it held no event.
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
