package mcp_test

import (
	"log/slog"
	"testing"

	"github.com/kerneld/kerneld/internal/tools"
	"github.com/kerneld/kerneld/internal/tools/mcp"
)

// BenchmarkTool_Call is one echo call through a running server, over
// each transport: what an MCP tool call costs a run beyond the tool's work.
func BenchmarkTool_Call(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			m := mustNewManager(b, mcp.Options{Logger: slog.New(slog.DiscardHandler)})
			echo := mustTools(b, m, tr.config(b))["t__echo"]
			args := []byte(`{"message":"hello"}`)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := echo.Call(b.Context(), tools.Call{Arguments: args}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
