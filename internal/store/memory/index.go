package memory

import (
	"cmp"
	"slices"
	"strings"

	"github.com/kerneld/kerneld/internal/session"
)

// metaEntry is one metadata entry: a key of the metadata index.
type metaEntry struct{ key, value string }

// placeIn returns where the session at c is, or goes, in list, which is
// ordered as s.order.
func placeIn(list []*record, c session.Cursor) (int, bool) {
	return slices.BinarySearchFunc(list, c, func(rec *record, c session.Cursor) int {
		return cmp.Or(rec.key.CreatedAt.Compare(c.CreatedAt), strings.Compare(rec.key.ID, c.ID))
	})
}

// index adds rec, at its key, to s.order and to the metadata index under
// each entry of md. s.mu is held.
func (s *Store) index(rec *record, md map[string]string) {
	s.order = insertAt(s.order, rec)
	for k, v := range md {
		e := metaEntry{k, v}
		s.byMetadata[e] = insertAt(s.byMetadata[e], rec)
	}
}

// unindex removes rec, at its key, from s.order and from the metadata
// index under each entry of md. s.mu is held.
func (s *Store) unindex(rec *record, md map[string]string) {
	s.order = removeAt(s.order, rec)
	for k, v := range md {
		e := metaEntry{k, v}
		if list := removeAt(s.byMetadata[e], rec); len(list) > 0 {
			s.byMetadata[e] = list
		} else {
			delete(s.byMetadata, e)
		}
	}
}

func insertAt(list []*record, rec *record) []*record {
	i, _ := placeIn(list, rec.key)
	return slices.Insert(list, i, rec)
}

func removeAt(list []*record, rec *record) []*record {
	if i, ok := placeIn(list, rec.key); ok {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// candidates returns the sessions that may match q, oldest first: those
// under q's least common metadata entry, so that a metadata filter reads
// only the sessions holding it, or else every session. s.mu is held.
func (s *Store) candidates(q session.Query) []*record {
	if len(q.Metadata) == 0 {
		return s.order
	}
	var best []*record
	first := true
	for k, v := range q.Metadata {
		list := s.byMetadata[metaEntry{k, v}]
		if first || len(list) < len(best) {
			best, first = list, false
		}
	}
	return best
}
