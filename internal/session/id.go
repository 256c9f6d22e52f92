package session

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"

	"github.com/google/uuid"
)

// base62 is the alphabet of kerneld's ids, in ASCII order, so that ids of
// one length sort as the numbers they write.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// IDLen is the length of the ids NewID returns.
const IDLen = 22

// messageIDLen is the length of the ids NewMessageID returns.
const messageIDLen = 16

// NewID returns a new id for a session or a run: a UUIDv7 written in 22
// base62 characters. Like the UUID it encodes it sorts by creation time,
// and ids issued as UUIDs by earlier versions of kerneld sort before every
// id of this form. It is 14 characters shorter than the UUID's usual text,
// which matters because every token event names its session and its run.
func NewID() string {
	u := uuid.Must(uuid.NewV7())
	return encode62(binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:]), IDLen)
}

// NewMessageID returns a new id for a message: 16 random base62
// characters (95 bits). Message ids are named by every token event and
// need no order: the history is ordered by position.
func NewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return encode62(binary.BigEndian.Uint64(b[:8])>>33, binary.BigEndian.Uint64(b[8:]), messageIDLen)
}

// encode62 writes the 128-bit number hi:lo in n base62 digits, most
// significant first, dropping digits beyond n.
func encode62(hi, lo uint64, n int) string {
	out := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		var r uint64
		hi, r = bits.Div64(0, hi, 62)
		lo, r = bits.Div64(r, lo, 62)
		out[i] = base62[r]
	}
	return string(out)
}

// ValidID reports whether id has the form of an id kerneld issues: NewID's,
// or a UUID as earlier versions of kerneld issued.
func ValidID(id string) bool {
	switch len(id) {
	case IDLen:
		for i := range len(id) {
			if !isBase62(id[i]) {
				return false
			}
		}
		return true
	case 36:
		_, err := uuid.Parse(id)
		return err == nil
	}
	return false
}

func isBase62(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}
