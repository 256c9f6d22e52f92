package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// TestToRunResponse_Source: a run a schedule posted says so; a client's
// says null.
func TestToRunResponse_Source(t *testing.T) {
	for source, want := range map[string]any{session.RunSourceSchedule: "schedule", "": nil} {
		r := session.Run{ID: "r1", SessionID: "s1", State: session.RunSucceeded, CreatedAt: time.Now()}
		r.Source = source
		b, err := json.Marshal(toRunResponse(r))
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Equal(t, want, got["source"])
	}
}

func TestFormatEvery(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", 90 * time.Minute: "1h30m",
		24 * time.Hour: "24h", 25*time.Hour + time.Second: "25h0m1s",
	} {
		assert.Equal(t, want, formatEvery(d), "formatEvery(%v)", d)
	}
}
