package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/tools"
)

// errCallTimeout is the cause of a call's context when its CallTimeout,
// rather than the caller, ended it.
var errCallTimeout = errors.New("mcp tool call timed out")

// tool is one tool of an MCP server, as a tools.Tool. It holds the server,
// not a session, so a call after a restart reaches the new instance.
type tool struct {
	srv     *server
	name    string // the server's name for it
	def     tools.Definition
	timeout time.Duration
}

var _ tools.Tool = (*tool)(nil)

func newTool(s *server, t *mcpsdk.Tool, timeout time.Duration) *tool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &tool{
		srv:     s,
		name:    t.Name,
		timeout: timeout,
		def: tools.Definition{
			Name:        s.cfg.Name + Separator + t.Name,
			Description: desc,
			Parameters:  schemaOf(t),
			RetrySafe:   retrySafe(t.Annotations),
			ReadOnly:    t.Annotations != nil && t.Annotations.ReadOnlyHint,
		},
	}
}

// retrySafe reads a tool's annotations: a tool that says it only reads, or
// that calling it again with the same arguments has no further effect,
// may be called again after a crash cut a call short. The annotations are
// hints a server gives about itself; an agent file that knows better sets
// retry on the tool.
func retrySafe(a *mcpsdk.ToolAnnotations) bool {
	return a != nil && (a.ReadOnlyHint || a.IdempotentHint)
}

// Definition implements tools.Tool.
func (t *tool) Definition() tools.Definition { return t.def }

// Call implements tools.Tool. It passes the model's arguments to the
// server as they are and returns the result's content as text. The call,
// including any wait for the server to start, is bounded by the server's
// CallTimeout. A server that is down and within its backoff fails at once.
func (t *tool) Call(ctx context.Context, call tools.Call) (string, error) {
	args, err := arguments(call.Arguments)
	if err != nil {
		return "", fmt.Errorf("call %s: %w", t.def.Name, err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, t.timeout, errCallTimeout)
	defer cancel()
	inst, err := t.srv.acquire(ctx)
	if err != nil {
		return "", t.wrap(ctx, err)
	}
	if !inst.beginCall() {
		return "", fmt.Errorf("call %s: %w", t.def.Name, context.Cause(inst.ctx))
	}
	defer inst.endCall()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer context.AfterFunc(inst.ctx, func() { stop(context.Cause(inst.ctx)) })()
	res, err := inst.session.CallTool(ctx, &mcpsdk.CallToolParams{Name: t.name, Arguments: args})
	if err != nil {
		return "", t.callError(ctx, inst, err)
	}
	return resultText(res)
}

// callError explains a failed call. Only a failure of the connection itself
// marks the server failed: a timeout or an error the server answered with
// leaves it running.
func (t *tool) callError(ctx context.Context, inst *instance, err error) error {
	if ctx.Err() != nil {
		return t.wrap(ctx, err)
	}
	if rpcErr, ok := serverAnswer(err); ok {
		return fmt.Errorf("call %s: %s", t.def.Name, rpcErr.Message)
	}
	t.srv.crashed(inst, err)
	return fmt.Errorf("call %s: %w: %w", t.def.Name, errdefs.ErrUpstream, err)
}

// wrap adds the tool's name to err and says why the call's context ended,
// if it did: its timeout, the server stopping, or the caller.
func (t *tool) wrap(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errCallTimeout):
		return fmt.Errorf("call %s: timed out after %s: %w", t.def.Name, t.timeout, context.DeadlineExceeded)
	case cause != nil:
		return fmt.Errorf("call %s: %w", t.def.Name, cause)
	}
	return fmt.Errorf("call %s: %w", t.def.Name, err)
}

// transportCodes are the JSON-RPC codes the SDK gives failures of the
// connection rather than answers from the server: its jsonrpc2 ErrRejected
// (an HTTP request that failed or was refused), ErrClientClosing and
// ErrServerClosing. They are not exported.
var transportCodes = []int64{-32005, -32003, -32004}

// serverAnswer returns the JSON-RPC error the server answered with, if err
// is one rather than a failure to reach it.
func serverAnswer(err error) (*jsonrpc.Error, bool) {
	var rpcErr *jsonrpc.Error
	if errors.Is(err, mcpsdk.ErrConnectionClosed) || !errors.As(err, &rpcErr) {
		return nil, false
	}
	return rpcErr, !slices.Contains(transportCodes, rpcErr.Code)
}

// arguments checks that raw is a JSON object, as MCP requires, without
// decoding it; empty means {}.
func arguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("arguments must be a JSON object: %w", errdefs.ErrInvalid)
	}
	return raw, nil
}
