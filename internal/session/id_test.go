package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestNewID(t *testing.T) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = NewID()
		if len(ids[i]) != IDLen || !ValidID(ids[i]) {
			t.Fatalf("NewID() = %q, want %d base62 characters", ids[i], IDLen)
		}
	}
	if !slices.IsSorted(ids) {
		t.Error("ids issued one after another do not sort in issue order")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) { // sorted, so repeats are neighbours
		t.Error("NewID repeated an id")
	}
	// An id of this form sorts after every UUID an earlier version issued.
	old := uuid.Must(uuid.NewV7()).String()
	if old >= NewID() {
		t.Errorf("UUID %s sorts after a new id", old)
	}
}

func TestNewMessageID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewMessageID()
		if len(id) != messageIDLen || strings.Trim(id, base62) != "" {
			t.Fatalf("NewMessageID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("NewMessageID repeated %q", id)
		}
		seen[id] = true
	}
}

func TestEncode62(t *testing.T) {
	tests := []struct {
		hi, lo uint64
		want   string
	}{
		{0, 0, "0000000000000000000000"},
		{0, 61, "000000000000000000000z"},
		{0, 62, "0000000000000000000010"},
		{^uint64(0), ^uint64(0), "7n42DGM5Tflk9n8mt7Fhc7"}, // 2^128-1
	}
	for _, tt := range tests {
		if got := encode62(tt.hi, tt.lo, IDLen); got != tt.want {
			t.Errorf("encode62(%x, %x) = %s, want %s", tt.hi, tt.lo, got, tt.want)
		}
	}
}

func TestValidID(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{NewID(), true},
		{uuid.Must(uuid.NewV7()).String(), true},
		{"", false},
		{"0000000000000000000000", true},
		{"000000000000000000000-", false},
		{"short", false},
		{"urn:uuid:" + uuid.NewString(), false},
	} {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}
