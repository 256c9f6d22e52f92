package main

import (
	"slices"
	"testing"
)

func TestParseSetups(t *testing.T) {
	got, err := parseSetups("sqlite,redis", "1,3")
	if err != nil {
		t.Fatal(err)
	}
	want := []setup{{"sqlite", 1}, {"redis", 1}, {"redis", 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("parseSetups = %v, want %v", got, want)
	}
	if got[2].String() != "redis ×3" || got[0].String() != "sqlite" {
		t.Fatalf("labels %q, %q", got[0], got[2])
	}
	for _, bad := range [][2]string{{"postgres", "1"}, {"redis", "0"}, {"redis", "x"}, {"redis", "17"}} {
		if _, err := parseSetups(bad[0], bad[1]); err == nil {
			t.Errorf("parseSetups(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
