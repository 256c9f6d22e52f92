package redis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kerneld/kerneld/internal/session"
	"github.com/kerneld/kerneld/internal/store/redis/redistest"
)

// A log written before entries were packed, one event an entry, reads on
// after it: appends go on from its last seq, and reads and tails from any
// cursor return both kinds of entry, each event once.
func TestLegacyEntries(t *testing.T) {
	srv := redistest.Use(t)
	st := mustOpen(t, srv)
	ctx := t.Context()
	id := mustCreateSession(t, st).ID
	rdb := srv.Client(t)
	stream := srv.Prefix + "{" + id + "}:ev"
	for seq := 1; seq <= 3; seq++ { // the fields events_append.lua wrote then
		require.NoError(t, rdb.XAdd(ctx, &goredis.XAddArgs{Stream: stream, ID: strconv.Itoa(seq) + "-0", Values: []any{
			"r", "run-0", "t", "CUSTOM", "ts", "1741957766535897", "d", `{"n":` + strconv.Itoa(seq) + `}`, "m", "",
		}}).Err())
	}
	require.NoError(t, rdb.HSet(ctx, srv.Prefix+"{"+id+"}:s", "last_seq", 3).Err())

	delivered := make(chan []session.Event, 16)
	tl := runTailer(t, st, func(evs []session.Event) { delivered <- evs })
	tl.Follow(id, 2)
	require.NoError(t, appendEvents(ctx, st, tokenEvents(id, "w", 5)))

	all, err := st.ReadEvents(ctx, id, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, seqsOf(all))
	assert.Equal(t, "run-0", all[0].RunID)
	assert.JSONEq(t, `{"n":3}`, string(all[2].Data))
	for after := range int64(8) {
		for _, limit := range []int{0, 1, 2} {
			evs, err := st.ReadEvents(ctx, id, after, limit)
			require.NoError(t, err)
			want := seqsOf(all)[after:]
			if limit > 0 {
				want = want[:min(limit, len(want))]
			}
			assert.Equal(t, want, seqsOf(evs), "after %d, limit %d", after, limit)
		}
	}
	var tailed []session.Event
	for len(tailed) < 6 {
		select {
		case evs := <-delivered:
			tailed = append(tailed, evs...)
		case <-time.After(10 * time.Second):
			t.Fatalf("tailed %v, then nothing for 10 s", seqsOf(tailed))
		}
	}
	assert.Equal(t, []int64{3, 4, 5, 6, 7, 8}, seqsOf(tailed), "tailed after seq 2")
}
