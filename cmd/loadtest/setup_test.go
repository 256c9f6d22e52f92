package main

import (
	"slices"
	"testing"
)

func TestParseSetups(t *testing.T) {
	got, err := parseSetups("sqlite,redis,postgres", "1,3")
	if err != nil {
		t.Fatal(err)
	}
	want := []setup{{"sqlite", 1}, {"redis", 1}, {"redis", 3}, {"postgres", 1}, {"postgres", 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("parseSetups = %v, want %v", got, want)
	}
	if got[2].String() != "redis ×3" || got[0].String() != "sqlite" || got[4].String() != "postgres ×3" {
		t.Fatalf("labels %q, %q, %q", got[0], got[2], got[4])
	}
	for _, bad := range [][2]string{{"mysql", "1"}, {"redis", "0"}, {"redis", "x"}, {"redis", "17"}} {
		if _, err := parseSetups(bad[0], bad[1]); err == nil {
			t.Errorf("parseSetups(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
