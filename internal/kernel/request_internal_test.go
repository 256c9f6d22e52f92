package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/session"
)

func TestSystemPromptSections(t *testing.T) {
	mem := []session.MemoryEntry{{Key: "name", Value: []byte(`"Ada"`)}}
	ctx := []session.ContextEntry{{Description: "page", Value: "/settings"}}
	assert.Equal(t, "Be brief.", withContext(systemPrompt("Be brief.", nil), nil))
	assert.Equal(t, "Be brief.\n\n"+
		"Session memory (JSON values kept across runs; change them with memory_set):\n- name: \"Ada\"\n\n"+
		"Context from the client for this run:\n- page: /settings\n",
		withContext(systemPrompt("Be brief.", mem), ctx))
	assert.Equal(t, "Context from the client for this run:\n- page: /settings\n", withContext("", ctx))
}

func TestWithInstructions(t *testing.T) {
	tests := []struct{ name, system, instructions, want string }{
		{"None", "Be brief.", "  ", "Be brief."},
		{"Appended", "Be brief.\n", "Answer in French.", "Be brief.\n\nInstructions for this session:\nAnswer in French."},
		{"NoAgentPrompt", "", "Answer in French.", "Answer in French."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withInstructions(tt.system, tt.instructions); got != tt.want {
				t.Errorf("withInstructions = %q, want %q", got, tt.want)
			}
		})
	}
}
