package session_test

import (
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/session"
)

func TestValidClientID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"thread-1", true},
		{"a.b:c_d-e", true},
		{"...", true},
		{".a", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a\x00b", false},
		{"a~b", false},
		{strings.Repeat("x", 129), false},
	}
	for _, tt := range tests {
		if got := session.ValidClientID(tt.id); got != tt.want {
			t.Errorf("ValidClientID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestValidateMemoryKey(t *testing.T) {
	tests := []struct {
		key     string
		wantErr string // "" for a valid key
	}{
		{"k", ""},
		{"prefs/theme", ""},
		{"a/b.c/d-e_f", ""},
		{"...", ""},
		{"a..b/.c/d.", ""},
		{strings.Repeat("k", 128), ""},
		{"", "characters"},
		{strings.Repeat("k", 129), "characters"},
		{"a b", "characters"},
		{"a\x00b", "characters"},
		{"é", "characters"},
		{"a/../b", "segments"},
		{"a/./b", "segments"},
		{"..", "segments"},
		{".", "segments"},
		{"a//b", "segments"},
		{"/a", "segments"},
		{"a/", "segments"},
	}
	for _, tt := range tests {
		err := session.ValidateMemoryKey(tt.key)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ValidateMemoryKey(%q) = %v, want nil", tt.key, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ValidateMemoryKey(%q) = %v, want an error about %s", tt.key, err, tt.wantErr)
		}
	}
}
