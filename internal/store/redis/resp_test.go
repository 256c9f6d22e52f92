package redis

import (
	"strconv"
	"strings"
	"testing"
	"time"

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

// packedEntry is a stream entry as events_append.lua writes it: evs,
// numbered to end at seq last.
func packedEntry(t *testing.T, last int64, evs ...session.Event) string {
	t.Helper()
	_, args := packBatch(nil, nil, evs)
	require.Len(t, args, 2, "one entry")
	return array(2) + bulk(strconv.FormatInt(last, 10)+"-0") + array(2) + bulk("e") + bulk(string(args[1].([]byte)))
}

// A batch is packed into entries of at most entryEvents events or about
// entryBytes, and read back as it was: run ids and types that repeat,
// times before and after each other, empty and missing data and meta, an
// event too big for an entry's share alone.
func TestPackedEntriesRoundTrip(t *testing.T) {
	base := time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)
	var evs []session.Event
	for i := range 2*entryEvents + 5 {
		ev := session.TextMessageContent("m1", " word"+strconv.Itoa(i))
		ev.RunID, ev.Time = "run-a", base.Add(time.Duration(i%7-3)*time.Millisecond)
		evs = append(evs, ev)
	}
	evs[3].RunID, evs[4].Type, evs[5].Meta = "run-b", session.EventCustom, []byte(`{"reason":"cancelled"}`)
	evs[6].Time, evs[7].Data = time.Time{}, nil
	evs[40].Data = []byte(`{"delta":"` + strings.Repeat("x", entryBytes) + `"}`)

	_, args := packBatch(nil, nil, evs)
	var reply string
	last, entries := int64(0), 0
	for i := 0; i < len(args); i += 2 {
		n := args[i].(int)
		require.LessOrEqual(t, n, entryEvents)
		last += int64(n)
		entries++
		reply += array(2) + bulk(strconv.FormatInt(last, 10)+"-0") + array(2) + bulk("e") + bulk(string(args[i+1].([]byte)))
	}
	assert.GreaterOrEqual(t, entries, 4, "entries: %d events, one alone", len(evs))

	got, err := newEntryReader([]byte(array(entries)+reply)).entries("s1", 0)
	require.NoError(t, err)
	require.Len(t, got, len(evs))
	for i, ev := range got {
		want := evs[i]
		want.Seq, want.SessionID = int64(i+1), "s1"
		want.Time = time.UnixMicro(want.Time.UnixMicro()).UTC()
		assert.Equal(t, want, ev, "event %d", i)
	}

	after, err := newEntryReader([]byte(array(entries)+reply)).entries("s1", 10)
	require.NoError(t, err)
	require.Len(t, after, len(evs)-10, "the events after a cursor inside the first entry")
	assert.Equal(t, int64(11), after[0].Seq)
}

// A tailer whose cursor is inside an entry delivers the events after it.
func TestReadReplyCursorInsideEntry(t *testing.T) {
	evs := make([]session.Event, 4)
	for i := range evs {
		evs[i] = session.TextMessageContent("m1", "w")
		evs[i].RunID = "run-1"
	}
	tl, sh, got := tailerOf()
	sh.follows["ev1"].after = 6
	reply := array(1) + array(2) + bulk("ev1") + array(1) + packedEntry(t, 8, evs...)
	require.NoError(t, tl.readReply(sh, map[string]*follow{"ev1": sh.follows["ev1"]}, newEntryReader([]byte(reply))))
	require.Len(t, *got, 2)
	assert.Equal(t, []int64{7, 8}, []int64{(*got)[0].Seq, (*got)[1].Seq})
	assert.EqualValues(t, 8, sh.follows["ev1"].after)
}

func TestUnpackMalformed(t *testing.T) {
	ev := session.TextMessageContent("m1", "w")
	ev.RunID = "run-1"
	_, args := packBatch(nil, nil, []session.Event{ev, ev})
	good := args[1].([]byte)
	for name, b := range map[string][]byte{
		"empty":          {},
		"truncated":      good[:len(good)-3],
		"same run first": append([]byte{sameRun | sameType}, good[1:]...),
	} {
		_, err := newEntryReader(nil).unpackEntry(nil, b, "s1", 2)
		assert.Error(t, err, name)
	}
}
