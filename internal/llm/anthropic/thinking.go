package anthropic

import (
	"slices"
	"sync"
)

// thinkingCacheSize bounds the responses whose thinking is kept. A tool
// loop needs only its latest response's, so this covers many concurrent
// runs.
const thinkingCacheSize = 1024

// thinkingCache keeps the signed thinking blocks of responses that called
// tools, by the id of their first tool call. With extended thinking on,
// the API requires them back, unchanged, in the assistant message that
// precedes the tool results; llm.Message has no place for them, so the
// client remembers them itself. The oldest entries go first.
type thinkingCache struct {
	mu     sync.Mutex
	max    int
	blocks map[string][]contentBlock
	order  []string // keys, oldest first
}

func newThinkingCache(size int) *thinkingCache {
	return &thinkingCache{max: size, blocks: make(map[string][]contentBlock)}
}

// put remembers the thinking of a response that made the tool calls ids.
func (c *thinkingCache) put(ids []string, blocks []contentBlock) {
	if len(ids) == 0 || len(blocks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.blocks[ids[0]]; !ok {
		c.order = append(c.order, ids[0])
	}
	c.blocks[ids[0]] = blocks
	for len(c.order) > c.max {
		delete(c.blocks, c.order[0])
		c.order = c.order[1:]
	}
}

// get returns a copy of the thinking that led to the tool call id.
func (c *thinkingCache) get(id string) ([]contentBlock, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blocks[id]
	return slices.Clone(b), ok
}
