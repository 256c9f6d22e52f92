package session

import "slices"

// Bounds of the read state a session keeps (see SessionExt.ReadCursors
// and SessionExt.Replies). A session remembers its latest MaxReplies
// assistant messages, so an unread count stops at MaxReplies; and the
// cursors of MaxReaders readers: past that, a new reader takes the place
// of the one that has read least, which then counts as having read
// nothing.
const (
	MaxReplies = 100
	MaxReaders = 256
)

// Unread returns how many of the session's assistant messages reader has
// not read: those logged after its cursor, 0 when it has none.
func (e *SessionExt) Unread(reader string) int {
	return UnreadOf(e.Replies, e.ReadCursors, reader)
}

// unreadAfter returns how many of replies, seqs oldest first, lie past
// cursor.
func unreadAfter(replies []int64, cursor int64) int {
	i, found := slices.BinarySearch(replies, cursor)
	if found {
		i++
	}
	return len(replies) - i
}

// UnreadOf returns how many of replies lie past reader's cursor in
// cursors, as Unread does for a session record.
func UnreadOf(replies []int64, cursors map[string]int64, reader string) int {
	return unreadAfter(replies, cursors[reader])
}

// MarkRead moves reader's cursor to seq, bounded by the session's last
// seq. A cursor never moves back: reading an older seq again (a second
// tab, a request that arrives late) leaves it where it is. It reports
// whether the cursor moved.
func (s *Session) MarkRead(reader string, seq int64) bool {
	seq = min(seq, s.LastSeq)
	if seq <= s.ReadCursors[reader] {
		return false
	}
	if s.ReadCursors == nil {
		s.ReadCursors = map[string]int64{}
	}
	if _, ok := s.ReadCursors[reader]; !ok && len(s.ReadCursors) >= MaxReaders {
		delete(s.ReadCursors, leastRead(s.ReadCursors))
	}
	s.ReadCursors[reader] = seq
	return true
}

// leastRead returns the reader whose cursor is lowest (the first by name
// among equals, so every replica picks the same).
func leastRead(cursors map[string]int64) string {
	var who string
	for r, c := range cursors {
		if who == "" || c < cursors[who] || (c == cursors[who] && r < who) {
			who = r
		}
	}
	return who
}

// AddReply records that an assistant message was logged at seq, keeping
// the latest MaxReplies. It reports false, changing nothing, for a seq
// not past the latest recorded (a continued run records a turn again).
func (e *SessionExt) AddReply(seq int64) bool {
	if n := len(e.Replies); n > 0 && e.Replies[n-1] >= seq {
		return false
	}
	e.Replies = append(e.Replies, seq)
	if over := len(e.Replies) - MaxReplies; over > 0 {
		e.Replies = slices.Delete(e.Replies, 0, over)
	}
	return true
}
