package memory

import (
	"context"

	"github.com/kerneld/kerneld/internal/session"
)

// pageSize is how many events one page of a session's log holds. The log
// is paged so that appending never copies old events: one growing slice
// would be copied, write barriers and all, on every growth. The first page
// starts small and grows by append, since most sessions are short.
const pageSize = 1024

// Arena chunk sizes. A session's first chunk is small because most
// sessions are short; chunks double up to the maximum for long ones.
// Values too large for a chunk get an allocation of their own.
const (
	minChunk = 1 << 10
	maxChunk = 64 << 10
)

// AppendEvents appends evs, all of one session, numbering them from the
// session's LastSeq + 1, while the session's lease is held with token. It
// writes each seq into evs and advances LastSeq.
// Either the whole batch is appended or none of it: a batch that names more
// than one session is ErrInvalid, an unknown session ErrNotFound.
//
// This is the hot path, so the session's lock is held only for the
// numbering and the copy, and Data and Meta are copied into a per-session
// arena instead of one allocation each. They are copied at all because
// callers may reuse their buffers once AppendEvents returns.
func (s *Store) AppendEvents(ctx context.Context, token int64, evs []session.Event) error {
	if len(evs) == 0 {
		return nil
	}
	id, err := session.EventsOfOneSession(evs)
	if err != nil {
		return err
	}
	return s.write(id, func(rec *record) error {
		if err := rec.fenced(token, s.now()); err != nil {
			return err
		}
		for i := range evs {
			rec.sess.LastSeq++
			evs[i].Seq = rec.sess.LastSeq
			rec.push(evs[i])
		}
		return nil
	})
}

// push adds ev to the end of the log, with its bytes copied to the arena.
func (rec *record) push(ev session.Event) {
	n := len(rec.pages)
	if n == 0 || len(rec.pages[n-1]) == pageSize {
		size := pageSize
		if n == 0 {
			size = 8
		}
		rec.pages = append(rec.pages, make([]session.Event, 0, size))
		n++
	}
	ev.Data, ev.Meta = rec.keep(ev.Data), rec.keep(ev.Meta)
	rec.pages[n-1] = append(rec.pages[n-1], ev)
}

// copyEvents copies the events at indexes from..to-1 (seqs from+1..to)
// into a new slice.
func (rec *record) copyEvents(from, to int) []session.Event {
	out := make([]session.Event, 0, to-from)
	for i := from; i < to; {
		page := rec.pages[i/pageSize]
		part := page[i%pageSize : min(len(page), i%pageSize+to-i)]
		out = append(out, part...)
		i += len(part)
	}
	return out
}

// keep copies b into the record's arena and returns the copy, capped so
// that appending to it can never overwrite a neighbour. nil stays nil.
func (rec *record) keep(b []byte) []byte {
	if len(b) == 0 {
		if b == nil {
			return nil
		}
		return []byte{}
	}
	if len(b) > cap(rec.arena)-len(rec.arena) {
		size := min(max(2*cap(rec.arena), minChunk), maxChunk)
		if len(b) > size/4 {
			return append(make([]byte, 0, len(b)), b...)
		}
		rec.arena = make([]byte, 0, size)
	}
	n := len(rec.arena)
	rec.arena = append(rec.arena, b...)
	return rec.arena[n:len(rec.arena):len(rec.arena)]
}

// ReadEvents returns a session's events with seq > after in seq order, at
// most limit of them when limit > 0.
//
// Stored Data and Meta bytes are never written again once appended, so
// only the event headers are copied under the lock; the bytes are copied
// after it is released, into one buffer shared by the returned events.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error) {
	var out []session.Event
	err := s.read(sessionID, func(rec *record) error {
		// Seqs are 1..LastSeq, so event seq sits at index seq-1.
		start := int(min(max(after, 0), rec.sess.LastSeq))
		end := int(rec.sess.LastSeq)
		if limit > 0 && limit < end-start {
			end = start + limit
		}
		out = rec.copyEvents(start, end)
		return nil
	})
	if err != nil {
		return nil, err
	}
	detach(out)
	return out, nil
}

// detach gives evs' Data and Meta fresh memory: one buffer for all of them.
func detach(evs []session.Event) {
	size := 0
	for i := range evs {
		size += len(evs[i].Data) + len(evs[i].Meta)
	}
	buf := make([]byte, 0, size)
	cut := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		n := len(buf)
		buf = append(buf, b...)
		return buf[n:len(buf):len(buf)]
	}
	for i := range evs {
		evs[i].Data = cut(evs[i].Data)
		evs[i].Meta = cut(evs[i].Meta)
	}
}
