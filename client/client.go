package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultURL is where a local kerneld listens by default.
const DefaultURL = "http://127.0.0.1:8080"

// Client calls one kerneld server. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	apiKey string
	user   string
	http   *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as "Authorization: Bearer <key>" on every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithUser sends user as X-Kerneld-User on every request: behind a proxy
// that authenticates its users (kerneld's auth.user_header), read cursors
// and unread counts are then the user's rather than the API key's.
func WithUser(user string) Option { return func(c *Client) { c.user = user } }

// WithHTTPClient makes the client send its requests with hc, for custom
// transports, proxies or TLS. Do not give it a Timeout: it would cut
// event streams off; bound single calls with their context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client for the kerneld at baseURL (e.g.
// "http://127.0.0.1:8080"; a path prefix is kept, for a kerneld behind a
// reverse proxy).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("parse base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("base URL %q: the scheme must be http or https", baseURL)
	}
	c := &Client{base: u, http: http.DefaultClient}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// request is one API call, built by the methods and sent by do.
type request struct {
	method string
	path   string     // already escaped
	query  url.Values // may be nil
	body   any        // marshalled as JSON when not nil
	header http.Header
}

// newRequest builds the HTTP request for r.
func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	var body io.Reader
	var err error
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := *c.base
	u.RawPath = c.base.EscapedPath() + r.path // keeps escapes such as %2F in ids
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, fmt.Errorf("request path %q: %w", r.path, err)
	}
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.user != "" {
		req.Header.Set("X-Kerneld-User", c.user)
	}
	return req, nil
}

// do sends r and decodes a successful JSON answer into out (unless out is
// nil). An answer of 400 or more is returned as a *Problem.
func (c *Client) do(ctx context.Context, r request, out any) error {
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }() // the body was read to its end or is abandoned
	if res.StatusCode >= 400 {
		return readProblem(res)
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, res.Body) // let the connection be reused
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", r.method, r.path, err)
	}
	return nil
}

// segment escapes one path segment (an id or a name).
func segment(s string) string { return url.PathEscape(s) }

// retryAfter reads a Retry-After header given in seconds.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
