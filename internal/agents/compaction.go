package agents

// CompactionPolicy says when and how an agent's history is compacted: once
// the history the next model call would see passes AtTokens (estimated)
// or AtMessages, the older part is replaced, for the model, by a summary
// the model writes, and the last KeepLast messages stay as they are.
type CompactionPolicy struct {
	AtTokens   int
	AtMessages int
	KeepLast   int
	// Model, when set, writes the summary instead of the run's model.
	Model string
	// Prompt, when set, replaces the default instruction for the summary.
	Prompt string
}

// DefaultKeepLast is how many messages an on-demand compaction keeps for
// an agent without a compaction policy.
const DefaultKeepLast = 10

// CompactionOrDefault returns the agent's compaction policy, or, for an
// agent without one, a policy that only compacts on demand.
func (s Spec) CompactionOrDefault() CompactionPolicy {
	if s.Memory.Compaction != nil {
		return *s.Memory.Compaction
	}
	return CompactionPolicy{KeepLast: DefaultKeepLast}
}

// validateCompaction checks memory.compaction.
func validateCompaction(c *CompactionPolicy) error {
	const field = "memory.compaction"
	switch {
	case c == nil:
		return nil
	case (c.AtTokens > 0) == (c.AtMessages > 0):
		return fieldError(field, "set exactly one of at_tokens and at_messages, positive")
	case c.AtTokens < 0 || c.AtMessages < 0:
		return fieldError(field, "at_tokens and at_messages must not be negative")
	case c.KeepLast < 1:
		return fieldError(field+".keep_last", "must be at least 1")
	case c.AtMessages > 0 && c.KeepLast >= c.AtMessages:
		return fieldError(field+".keep_last", "must be less than at_messages (%d)", c.AtMessages)
	}
	return nil
}
