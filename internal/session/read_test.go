package session_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/session"
)

func TestSession_MarkRead(t *testing.T) {
	s := session.Session{LastSeq: 40}
	for _, seq := range []int64{10, 20, 30} {
		s.AddReply(seq)
	}
	if got := s.Unread("ann"); got != 3 {
		t.Errorf("Unread before any read = %d, want 3", got)
	}
	tests := []struct {
		name       string
		seq        int64
		wantMoved  bool
		wantCursor int64
		wantUnread int
	}{
		{"OnAReply", 20, true, 20, 1},
		{"Backwards", 5, false, 20, 1},
		{"Same", 20, false, 20, 1},
		{"PastTheEnd", 99, true, 40, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moved := s.MarkRead("ann", tt.seq)
			if moved != tt.wantMoved || s.ReadCursors["ann"] != tt.wantCursor || s.Unread("ann") != tt.wantUnread {
				t.Errorf("MarkRead(%d) = %v, cursor %d, unread %d; want %v, %d, %d",
					tt.seq, moved, s.ReadCursors["ann"], s.Unread("ann"), tt.wantMoved, tt.wantCursor, tt.wantUnread)
			}
		})
	}
	if got := s.Unread("bob"); got != 3 {
		t.Errorf("another reader's Unread = %d, want 3", got)
	}
}

func TestSession_AddReplyBounds(t *testing.T) {
	var s session.Session
	for seq := int64(1); seq <= session.MaxReplies+10; seq++ {
		if !s.AddReply(seq) {
			t.Fatalf("AddReply(%d) refused", seq)
		}
	}
	if s.AddReply(5) {
		t.Error("AddReply of an old seq counted it again")
	}
	if got := s.Unread("ann"); got != session.MaxReplies {
		t.Errorf("Unread = %d, want the bound %d", got, session.MaxReplies)
	}
}

func TestSession_MarkReadEvictsLeastRead(t *testing.T) {
	s := session.Session{LastSeq: 1000}
	for i := range session.MaxReaders {
		s.MarkRead(string(rune('a'+i%26))+string(rune('A'+i/26)), int64(i+1))
	}
	s.MarkRead("new", 500)
	if len(s.ReadCursors) != session.MaxReaders {
		t.Fatalf("%d readers kept, want %d", len(s.ReadCursors), session.MaxReaders)
	}
	if _, ok := s.ReadCursors["aA"]; ok {
		t.Error("the reader that read least was kept")
	}
}
