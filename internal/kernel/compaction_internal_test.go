package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/agents"
	"github.com/kerneld/kerneld/internal/llm"
)

// history builds messages from role letters: u, a (assistant), t (tool).
func history(roles string) []llm.Message {
	names := map[rune]llm.Role{'u': llm.RoleUser, 'a': llm.RoleAssistant, 't': llm.RoleTool}
	out := make([]llm.Message, 0, len(roles))
	for _, r := range roles {
		out = append(out, llm.Message{Role: names[r], Content: "0123456789abcdef"})
	}
	return out
}

func TestKeptFrom(t *testing.T) {
	tests := []struct {
		name  string
		roles string
		keep  int
		want  int
	}{
		{"short history", "uaua", 4, 0},
		{"grows back to the user message of its turn", "uauatau", 2, 2},
		{"at a user message", "uauau", 1, 4},
		{"shrinks to the next user message when the turn is the first", "uatatau", 4, 6},
		{"one long turn: anywhere but at a tool result", "uatatata", 3, 5},
		{"one long turn: back to the call of its results", "uattttt", 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, keptFrom(history(tt.roles), tt.keep))
		})
	}
}

func TestOver(t *testing.T) {
	view := history("uau") // 3 messages of 16 bytes: 3 × (4 + 4) = 24 tokens
	assert.Equal(t, int64(24), estimateTokens(view))
	assert.True(t, over(agents.CompactionPolicy{AtMessages: 2}, view))
	assert.False(t, over(agents.CompactionPolicy{AtMessages: 3}, view))
	assert.True(t, over(agents.CompactionPolicy{AtTokens: 23}, view))
	assert.False(t, over(agents.CompactionPolicy{AtTokens: 24}, view))
	assert.False(t, over(agents.CompactionPolicy{KeepLast: 10}, view), "an on-demand policy never triggers")
}
