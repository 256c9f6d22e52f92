package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Counter is an MCP server over streamable HTTP, in the test's own
// process, whose tools count their calls and hold each one until
// released: what a tool with side effects looks like to a process killed
// in the middle of a call, and counted where the kill cannot reach. Its
// tools: once, which says nothing of itself, and again, which says that
// calling it again has no further effect (idempotentHint). Each answers
// "<name> call <n>".
type Counter struct {
	*httptest.Server
	mu      sync.Mutex
	calls   map[string]int
	started chan string
	release chan struct{}
	once    sync.Once
}

// ServeCounter starts a Counter, closed when the test ends.
func ServeCounter(tb testing.TB) *Counter {
	tb.Helper()
	c := &Counter{calls: map[string]int{}, started: make(chan string, 64), release: make(chan struct{})}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "kerneld-counter", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "once", Description: "Counts its calls; not safe to call again."}, c.handler("once"))
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "again", Description: "Counts its calls; calling it again changes nothing.",
		Annotations: &mcpsdk.ToolAnnotations{IdempotentHint: true}}, c.handler("again"))
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	c.Server = httptest.NewServer(h)
	tb.Cleanup(func() {
		c.Release()
		c.CloseClientConnections()
		c.Close()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	return c
}

func (c *Counter) handler(name string) mcpsdk.ToolHandlerFor[noArgs, any] {
	return func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
		c.mu.Lock()
		c.calls[name]++
		n := c.calls[name]
		c.mu.Unlock()
		c.started <- name
		select {
		case <-c.release:
			return textResult(fmt.Sprintf("%s call %d", name, n)), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// Calls returns how many times tool name was called.
func (c *Counter) Calls(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[name]
}

// Started receives a tool's name each time one of its calls starts.
func (c *Counter) Started() <-chan string { return c.started }

// Release lets every call, held or still to come, answer.
func (c *Counter) Release() { c.once.Do(func() { close(c.release) }) }
