package kernel_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/store/sqlite"
)

// compactingLate compacts only when asked, keeping two messages.
const compactingLate = `
name: late
model: {provider: recorded, script: [{text: "re: {input}"}], summary: "Earlier: {input}"}
memory: {compaction: {at_messages: 100, keep_last: 2}}
`

// TestFork_KeepsCompactionSummary: a fork and a regenerate of a compacted
// session go on seeing the summary in place of what it replaced, not just
// the kept tail.
func TestFork_KeepsCompactionSummary(t *testing.T) {
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			var store kernel.Store
			if name == "sqlite" {
				db, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "k.db")})
				require.NoError(t, err)
				t.Cleanup(func() { _ = db.Close() })
				store = db
			}
			p := &recordingProvider{}
			k, rec := newCompactingKernel(t, p, store, compactingLate)
			s := mustSession(t, k.Kernel, "late")
			for _, in := range []string{"one", "two", "three"} {
				runToEnd(t, k.Kernel, rec, s.ID, in)
			}
			_, entry, err := k.Compact(t.Context(), s.ID)
			require.NoError(t, err)
			require.NotNil(t, entry, "three runs are enough to compact")
			fourth := runToEnd(t, k.Kernel, rec, s.ID, "four")
			summary := "user: Summary of the earlier conversation, which is no longer shown:\n\n" + entry.Content

			fork, err := k.ForkSession(t.Context(), s.ID, kernel.ForkRequest{})
			require.NoError(t, err)
			runToEnd(t, k.Kernel, rec, fork.ID, "five")
			reqs := p.Requests()
			assert.Equal(t, summary, contents(reqs[len(reqs)-1].Messages)[0], "the fork's model sees the summary first")

			regen, again, err := k.Regenerate(t.Context(), s.ID, fourth.ID)
			require.NoError(t, err)
			waitRun(t, k.Kernel, rec, regen.ID, again.ID)
			reqs = p.Requests()
			assert.Equal(t, summary, contents(reqs[len(reqs)-1].Messages)[0], "the regenerated run's model sees the summary first")
		})
	}
}
