package quota_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/quota"
)

// TestLimiter_StartRun: an admitted run holds a concurrent place until
// done; a run that did not start gives its run per minute back, one that
// started does not.
func TestLimiter_StartRun(t *testing.T) {
	l := quota.New(quota.Options{Limits: quota.Limits{RunsPerMinute: 2, MaxConcurrentRuns: 1}})
	defer l.Close()
	ctx := context.Background()
	done, err := l.StartRun(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartRun(ctx, "acme"); errdefs.CodeOf(err) != quota.CodeQuotaExceeded {
		t.Fatalf("second concurrent run: err = %v, want %s", err, quota.CodeQuotaExceeded)
	}
	if _, err := l.StartRun(ctx, "other"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	done(false) // not started: both places back
	done(true)  // a second call changes nothing
	for i := range 2 {
		done, err := l.StartRun(ctx, "acme")
		if err != nil {
			t.Fatalf("run %d after the refund: %v", i, err)
		}
		done(true)
	}
	_, err = l.StartRun(ctx, "acme")
	if !errors.Is(err, errdefs.ErrExhausted) || errdefs.CodeOf(err) != quota.CodeRateLimited {
		t.Fatalf("third run in the minute: err = %v, want %s", err, quota.CodeRateLimited)
	}
	if secs, ok := quota.RetryAfter(err); !ok || secs < 1 || secs > 30 {
		t.Errorf("RetryAfter = %d, %v; want 1 to 30 s", secs, ok)
	}
}

// TestLimiter_Nil: a nil limiter limits nothing.
func TestLimiter_Nil(t *testing.T) {
	var l *quota.Limiter
	ctx := context.Background()
	if _, ok, err := l.AllowRequest(ctx, "acme"); ok || err != nil {
		t.Errorf("AllowRequest = %v, %v", ok, err)
	}
	done, err := l.StartRun(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	done(true)
	if err := l.ChargeTokens(ctx, "acme", 1e12); err != nil {
		t.Error(err)
	}
	l.RunStarted("acme")
	l.RunEnded("acme")
	l.Close()
}

// BenchmarkLimiter_AllowRequest is the check every request of a tenant
// makes with the in-process counters.
func BenchmarkLimiter_AllowRequest(b *testing.B) {
	l := quota.New(quota.Options{Limits: quota.Limits{RequestsPerSecond: 1e9, RequestBurst: 1e9}})
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := l.AllowRequest(ctx, "acme"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
