package redis

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/session"
)

// A batch of events goes into a session's stream as few entries as its
// size allows: each entry holds up to entryEvents consecutive events, or
// entryBytes of them (a larger event alone), packed into its one field
// "e", and its id is the seq of its last event. Redis' work per entry
// (the append script's XADD, the stream's bookkeeping, a tailer's read)
// then comes once per batch rather than once per event, and the packing
// leaves out what consecutive events repeat: their run id, their type, and
// the start of their data, which for token events is all but the token
// itself. An entry of one event cost the server 2.3 µs of CPU per token
// event in the append script alone, and 171 bytes of memory each.
//
// The id being the last seq keeps a seq cursor a stream cursor: XRANGE
// from after+1 and XREAD after a seq return the entries holding the
// events after it, the first of them perhaps with events before it too,
// which readers skip. Logs written before hold one event per entry in the
// fields r, t, ts, d and m (see legacyField); readers take both.
const (
	entryEvents = 32
	entryBytes  = 8 << 10
)

// packFlags say which members of an event repeat the event before it in
// its entry, and are left out.
const (
	sameRun  byte = 1 << iota // its run id
	sameType                  // its type
)

// packBatch packs evs into entries and returns them appended to args,
// each as its number of events and its packed events, which is what
// events_append.lua takes after its token and batch id. dst is the buffer
// the entries are packed into, returned for reuse.
func packBatch(dst []byte, args []any, evs []session.Event) ([]byte, []any) {
	type cut struct{ n, end int }
	var cuts []cut
	base := len(dst)
	start, n := base, 0
	for i := range evs {
		if n > 0 && (n == entryEvents || len(dst)-start+eventSize(&evs[i]) > entryBytes) {
			cuts = append(cuts, cut{n, len(dst)})
			start, n = len(dst), 0
		}
		var prev *session.Event
		if n > 0 {
			prev = &evs[i-1]
		}
		dst = packEvent(dst, &evs[i], prev)
		n++
	}
	cuts = append(cuts, cut{n, len(dst)})
	from := base
	for _, c := range cuts {
		args = append(args, c.n, dst[from:c.end:c.end])
		from = c.end
	}
	return dst, args
}

// eventSize is about what packEvent adds for ev, to decide where an entry
// ends.
func eventSize(ev *session.Event) int {
	return 16 + len(ev.RunID) + len(ev.Type) + len(ev.Data) + len(ev.Meta)
}

// packEvent appends ev to dst: its flags byte, then its run id and type
// unless they are prev's, its time as microseconds (after prev's, as the
// difference from prev's), how many bytes its data shares with the start
// of prev's and the rest of its data, and its meta; strings after their
// length, numbers as varints.
func packEvent(dst []byte, ev, prev *session.Event) []byte {
	var flags byte
	if prev != nil && prev.RunID == ev.RunID {
		flags |= sameRun
	}
	if prev != nil && prev.Type == ev.Type {
		flags |= sameType
	}
	dst = append(dst, flags)
	if flags&sameRun == 0 {
		dst = packBytes(dst, ev.RunID)
	}
	if flags&sameType == 0 {
		dst = packBytes(dst, ev.Type)
	}
	us := micros(ev.Time)
	if prev != nil {
		us -= micros(prev.Time)
	}
	dst = binary.AppendVarint(dst, us)
	shared := 0
	if prev != nil {
		shared = commonPrefix(prev.Data, ev.Data)
	}
	dst = binary.AppendUvarint(dst, uint64(shared))
	dst = packBytes(dst, ev.Data[shared:])
	return packBytes(dst, ev.Meta)
}

// commonPrefix returns how many bytes a and b share at their start.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func packBytes[S ~string | ~[]byte](dst []byte, s S) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// unpackEntry appends to out the events packed in b, an entry's "e"
// field, numbered so that the last is seq last. Their Data and Meta point
// into b.
func (r *entryReader) unpackEntry(out []session.Event, b []byte, sessionID string, last int64) ([]session.Event, error) {
	first := len(out)
	var prev *session.Event
	for len(b) > 0 {
		ev := session.Event{SessionID: sessionID}
		var err error
		if b, err = r.unpackEvent(&ev, b, prev); err != nil {
			return out, fmt.Errorf("stream entry %d: %w", last, err)
		}
		out = append(out, ev)
		prev = &out[len(out)-1]
	}
	n := int64(len(out) - first)
	if n == 0 {
		return out, fmt.Errorf("stream entry %d: no events: %w", last, errShortReply)
	}
	for i := range out[first:] {
		out[first+i].Seq = last - n + 1 + int64(i)
	}
	return out, nil
}

// unpackEvent reads into ev what packEvent wrote and returns the rest of b.
func (r *entryReader) unpackEvent(ev *session.Event, b []byte, prev *session.Event) ([]byte, error) {
	if len(b) == 0 {
		return nil, errShortReply
	}
	flags, b := b[0], b[1:]
	var s []byte
	var err error
	switch {
	case flags&sameRun == 0:
		if s, b, err = unpackBytes(b); err != nil {
			return nil, err
		}
		ev.RunID = r.name(s)
	case prev != nil:
		ev.RunID = prev.RunID
	default:
		return nil, errShortReply
	}
	switch {
	case flags&sameType == 0:
		if s, b, err = unpackBytes(b); err != nil {
			return nil, err
		}
		ev.Type = session.EventType(r.name(s))
	case prev != nil:
		ev.Type = prev.Type
	default:
		return nil, errShortReply
	}
	us, n := binary.Varint(b)
	if n <= 0 {
		return nil, errShortReply
	}
	if prev != nil {
		us += micros(prev.Time)
	}
	ev.Time = time.UnixMicro(us).UTC()
	shared, k := binary.Uvarint(b[n:])
	if k <= 0 || shared > 0 && (prev == nil || shared > uint64(len(prev.Data))) {
		return nil, errShortReply
	}
	if s, b, err = unpackBytes(b[n+k:]); err != nil {
		return nil, err
	}
	ev.Data = s
	if shared > 0 { // the start of prev's data, then s: a copy of its own
		ev.Data = append(append(r.alloc(int(shared)+len(s)), prev.Data[:shared]...), s...)
	}
	ev.Data = nilIfEmpty(ev.Data)
	ev.Meta, b, err = unpackBytes(b)
	ev.Meta = nilIfEmpty(ev.Meta)
	return b, err
}

// arenaChunk is the size of the buffers an entryReader copies events'
// data into.
const arenaChunk = 64 << 10

// alloc returns an empty slice with room for n bytes, from a buffer shared
// with other events of the reply rather than an allocation of its own,
// capped so that appending past n cannot overwrite a neighbour.
func (r *entryReader) alloc(n int) []byte {
	if n > arenaChunk/4 {
		return make([]byte, 0, n)
	}
	if n > cap(r.arena)-len(r.arena) {
		r.arena = make([]byte, 0, arenaChunk)
	}
	start := len(r.arena)
	r.arena = r.arena[:start+n]
	return r.arena[start : start : start+n]
}

// unpackBytes reads a string packBytes wrote, capped so that appending to
// it cannot overwrite what follows, and returns the rest of b.
func unpackBytes(b []byte) (s, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errShortReply
	}
	end := k + int(n)
	return b[k:end:end], b[end:], nil
}
