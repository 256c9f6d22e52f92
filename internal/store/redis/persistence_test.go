package redis

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPersistenceWarningSettings(t *testing.T) {
	tests := []struct {
		name       string
		aof, fsync string
		err        error
		want       string // in the warning; "" for none
	}{
		{"no append-only file", "no", "everysec", nil, "appendonly no"},
		{"append-only file synced every second", "yes", "everysec", nil, ""},
		{"append-only file always synced", "yes", "always", nil, ""},
		{"append-only file never synced", "yes", "no", nil, "appendfsync no"},
		{"CONFIG refused", "", "", errors.New("NOPERM"), "could not check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := persistenceWarning(tt.aof, tt.fsync, tt.err)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
		})
	}
}
