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
