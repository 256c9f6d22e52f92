package redis

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/session"
)

// The tests against a server speak RESP3, go-redis' default; these feed
// the parser both protocols' shapes of an XREAD reply by hand.

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func array(n int) string { return "*" + strconv.Itoa(n) + "\r\n" }

// entry is a stream entry as events_append.lua writes it.
func entry(id, data string) string {
	return array(2) + bulk(id) + array(10) + bulk("r") + bulk("run-1") + bulk("t") + bulk("CUSTOM") +
		bulk("ts") + bulk("1741957766535897") + bulk("d") + bulk(data) + bulk("m") + bulk("")
}

// tailerOf returns a tailer with one shard, whose wake-up stream is "wake",
// following session s1 in stream "ev1", and the events it delivers.
func tailerOf() (*Tailer, *shard, *[]session.Event) {
	var got []session.Event
	sh := &shard{wake: "wake", follows: make(map[string]*follow)}
	t := &Tailer{follows: make(map[string]*follow), deliver: func(evs []session.Event) { got = append(got, evs...) }}
	f := &follow{sessionID: "s1", stream: "ev1", refs: 1, shard: sh}
	t.follows["s1"], sh.follows["ev1"] = f, f
	return t, sh, &got
}

func TestReadReply(t *testing.T) {
	wake := bulk("wake") + array(1) + array(2) + bulk("1700000000000-0") + array(2) + bulk("w") + bulk("1")
	events := bulk("ev1") + array(2) + entry("1-0", `{"a":1}`) + entry("2-0", `{"a":2}`)
	tests := []struct {
		name, reply string
	}{
		{"RESP2", array(2) + array(2) + wake + array(2) + events},
		{"RESP3", "%2\r\n" + wake + events},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, sh, got := tailerOf()
			byStream := map[string]*follow{"ev1": sh.follows["ev1"]}
			require.NoError(t, tl.readReply(sh, byStream, newEntryReader([]byte(tt.reply))))
			assert.Equal(t, "1700000000000-0", sh.wakeID, "cursor of the wake-up stream")
			require.Len(t, *got, 2)
			ev := (*got)[1]
			assert.Equal(t, int64(2), ev.Seq)
			assert.Equal(t, "s1", ev.SessionID)
			assert.Equal(t, "run-1", ev.RunID)
			assert.Equal(t, session.EventCustom, ev.Type)
			assert.Equal(t, `{"a":2}`, string(ev.Data))
			assert.Nil(t, ev.Meta)
			assert.Equal(t, int64(1741957766535897), ev.Time.UnixMicro())
			assert.EqualValues(t, 2, sh.follows["ev1"].after, "the follow's cursor")
		})
	}
}

func TestReadReplyNothing(t *testing.T) {
	for _, reply := range []string{"*-1\r\n", "_\r\n"} {
		tl, sh, got := tailerOf()
		require.NoError(t, tl.readReply(sh, nil, newEntryReader([]byte(reply))), "reply %q", reply)
		assert.Empty(t, *got)
	}
}

func TestReadReplyMalformed(t *testing.T) {
	good := array(1) + array(2) + bulk("ev1") + array(1) + entry("1-0", `{}`)
	tests := []struct{ name, reply, want string }{
		{"error reply", "-ERR wrong\r\n", "wrong"},
		{"truncated", good[:len(good)-10], "malformed"},
		{"unknown stream", strings.Replace(good, bulk("ev1"), bulk("ev9"), 1), "not read"},
		{"bad id", strings.Replace(good, bulk("1-0"), bulk("x-0"), 1), "malformed"},
		{"not an array", ":1\r\n", "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, sh, got := tailerOf()
			byStream := map[string]*follow{"ev1": sh.follows["ev1"]}
			err := tl.readReply(sh, byStream, newEntryReader([]byte(tt.reply)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, *got)
		})
	}
}

func TestPackedEvents(t *testing.T) {
	evs := []session.Event{{RunID: "r", Type: session.EventCustom, Data: []byte(`{}`)}, {Meta: []byte(`{"x":1}`)}}
	b := packEvents(nil, evs)
	// Five length-prefixed strings an event: run, type, time, data, meta.
	var parts []string
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 4)
		n := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		parts = append(parts, string(b[4:4+n]))
		b = b[4+n:]
	}
	require.Len(t, parts, 10)
	assert.Equal(t, []string{"r", "CUSTOM", "-62135596800000000", "{}", ""}, parts[:5])
	assert.Equal(t, `{"x":1}`, parts[9])
}
