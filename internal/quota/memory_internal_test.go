package quota

import (
	"context"
	"testing"
	"time"
)

// TestMemory_Take: a bucket starts full, refills at its rate up to its
// size, refuses a unit it does not hold, and takes one given back.
func TestMemory_Take(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := NewMemory()
	m.now = func() time.Time { return now }
	ctx := context.Background()
	take := func(n int) Bucket {
		t.Helper()
		b, err := m.Take(ctx, "k", 2, 3, n) // 2 units/s, 3 at most
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	steps := []struct {
		name    string
		advance time.Duration
		n       int
		want    Bucket
	}{
		{"a new bucket is full", 0, 1, Bucket{Allowed: true, Tokens: 2}},
		{"take", 0, 1, Bucket{Allowed: true, Tokens: 1}},
		{"take the last", 0, 1, Bucket{Allowed: true, Tokens: 0}},
		{"empty", 0, 1, Bucket{Allowed: false, Tokens: 0}},
		{"a quarter second refills half a unit", 250 * time.Millisecond, 1, Bucket{Allowed: false, Tokens: 0.5}},
		{"half a second refills a unit", 250 * time.Millisecond, 1, Bucket{Allowed: true, Tokens: 0}},
		{"a long pause fills it, no more", time.Hour, 0, Bucket{Allowed: true, Tokens: 3}},
		{"giving back never overfills", 0, -1, Bucket{Allowed: true, Tokens: 3}},
		{"take after a refund", 0, 1, Bucket{Allowed: true, Tokens: 2}},
		{"give one back", 0, -1, Bucket{Allowed: true, Tokens: 3}},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if got := take(s.n); got != s.want {
			t.Errorf("%s: Take(%d) = %+v, want %+v", s.name, s.n, got, s.want)
		}
	}
}

// TestMemory_Add: a counter expires ttl after it was made, and the next
// add starts it again from zero.
func TestMemory_Add(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := NewMemory()
	m.now = func() time.Time { return now }
	add := func(key string, n int64) int64 {
		t.Helper()
		v, err := m.Add(context.Background(), key, n, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := add("a", 5) + add("a", 0) + add("b", 1); got != 11 {
		t.Errorf("sum of reads = %d, want 5+5+1", got)
	}
	now = now.Add(2 * time.Hour)
	if got := add("a", 2); got != 2 {
		t.Errorf("after expiry = %d, want 2", got)
	}
	if len(m.counters) != 1 {
		t.Errorf("%d counters kept, want the live one only", len(m.counters))
	}
}

// TestUntilTomorrow: the token day is the UTC day.
func TestUntilTomorrow(t *testing.T) {
	at := time.Date(2026, 3, 1, 23, 59, 30, 0, time.FixedZone("UTC-5", -5*3600)) // 04:59:30 UTC on the 2nd
	if got, want := untilTomorrow(at), 19*time.Hour+30*time.Second; got != want {
		t.Errorf("untilTomorrow = %s, want %s", got, want)
	}
}
