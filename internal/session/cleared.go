package session

// CustomSessionCleared is the CUSTOM event a clear run logs once the
// session's history is emptied: {"runId", "messageId", "position",
// "messages", "memory"}. A client showing the conversation starts it anew.
const CustomSessionCleared = "kerneld.session.cleared"

// ClearedEvent is the CUSTOM event that logs a clear: entry is the clear
// entry it added to the history, memory says the memory went too.
func ClearedEvent(runID string, entry *Message, memory bool) Event {
	return Custom(CustomSessionCleared, map[string]any{
		"runId": runID, "messageId": entry.ID, "position": entry.Position,
		"messages": entry.Compaction.Messages, "memory": memory,
	})
}

// AfterClear returns the part of msgs, a history oldest first, that a
// session cleared at position clearedAt shows: from its clear entry on.
func AfterClear(msgs []Message, clearedAt int64) []Message {
	for i := range msgs {
		if msgs[i].Position >= clearedAt {
			return msgs[i:]
		}
	}
	return msgs[len(msgs):]
}
