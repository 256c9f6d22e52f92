package transfer_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// TestDumpCarriesEveryField is a tripwire: a dump must carry every field
// of what it moves, so a field added to one of these types fails here
// until records.go moves it too (and docs/transfer.md names it). Ext
// structs travel whole, as the stores keep them, and need no entry.
func TestDumpCarriesEveryField(t *testing.T) {
	cases := []struct {
		v    any
		want []string
	}{
		{session.Session{}, []string{"ID", "Tenant", "Agent", "Name", "Metadata", "State", "ParentID", "RootID",
			"Depth", "CreatedAt", "UpdatedAt", "LastSeq", "ActiveRunID", "TTL", "ExpiresAt", "InheritMemory",
			"ForkedFrom", "Version", "SessionExt"}},
		{session.Run{}, []string{"ID", "SessionID", "State", "Input", "IdempotencyKey", "CreatedAt", "StartedAt",
			"EndedAt", "Error", "Usage", "StartSeq", "EndSeq", "Version", "RunExt"}},
		{session.RunError{}, []string{"Code", "Message"}},
		{session.Message{}, []string{"ID", "SessionID", "Position", "RunID", "Role", "Content", "Images",
			"ToolCalls", "ToolCallID", "IsError", "Compaction", "CreatedAt", "Agent"}},
		{session.ToolCall{}, []string{"ID", "Name", "Arguments"}},
		{session.MemoryEntry{}, []string{"SessionID", "Key", "Value", "UpdatedAt"}},
		{session.Image{}, []string{"Tenant", "Hash", "MediaType", "Size", "Data", "CreatedAt"}},
		{session.Event{}, []string{"Seq", "SessionID", "RunID", "Type", "Time", "Data", "Meta"}},
		// Claim stays behind on purpose: it fences one store's firings.
		{schedule.Schedule{}, []string{"ID", "Tenant", "SessionID", "At", "Every", "Input", "IfBusy", "NextAt",
			"CreatedAt", "Fired", "Last", "Claim"}},
	}
	for _, tc := range cases {
		typ := reflect.TypeOf(tc.v)
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		assert.Equal(t, tc.want, got, "fields of %s: move a new one in records.go and list it here", typ)
	}
}
