package quota_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/quota"
)

// TestLimiter_AdmitRun: a run not created gives its run per minute back,
// one created does not. A run starting holds a concurrent place until
// RunEnded, or until done(false) when it did not start.
func TestLimiter_AdmitRun(t *testing.T) {
	l := quota.New(quota.Options{Limits: quota.Limits{RunsPerMinute: 2, MaxConcurrentRuns: 1}})
	defer l.Close()
	ctx := context.Background()
	done, err := l.AdmitRun(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	done(false) // not created: its run per minute back
	done(true)  // a second call changes nothing
	for i := range 2 {
		done, err := l.AdmitRun(ctx, "acme")
		if err != nil {
			t.Fatalf("run %d after the refund: %v", i, err)
		}
		done(true)
	}
	_, err = l.AdmitRun(ctx, "acme")
	if !errors.Is(err, errdefs.ErrExhausted) || errdefs.CodeOf(err) != errdefs.CodeRateLimited {
		t.Fatalf("third run in the minute: err = %v, want %s", err, errdefs.CodeRateLimited)
	}
	if secs, ok := quota.RetryAfter(err); !ok || secs < 1 || secs > 30 {
		t.Errorf("RetryAfter = %d, %v; want 1 to 30 s", secs, ok)
	}

	start, err := l.AdmitStart(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AdmitStart(ctx, "acme"); errdefs.CodeOf(err) != errdefs.CodeQuotaExceeded {
		t.Fatalf("second concurrent run: err = %v, want %s", err, errdefs.CodeQuotaExceeded)
	}
	if _, err := l.AdmitStart(ctx, "other"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	start(false) // did not start: the place is back
	start, err = l.AdmitStart(ctx, "acme")
	if err != nil {
		t.Fatalf("a start once the first gave its place back: %v", err)
	}
	start(true) // executing: the place is the run's
	start(false)
	if _, err := l.AdmitStart(ctx, "acme"); errdefs.CodeOf(err) != errdefs.CodeQuotaExceeded {
		t.Fatalf("a start while one executes: err = %v, want %s", err, errdefs.CodeQuotaExceeded)
	}
	l.RunEnded("acme")
	if _, err := l.AdmitStart(ctx, "acme"); err != nil {
		t.Fatalf("a start once the executing run ended: %v", err)
	}
}

// TestLimiter_AdmitSession: creations racing for the last places get one
// each; the count is taken under the tenant's lock, held until done.
func TestLimiter_AdmitSession(t *testing.T) {
	l := quota.New(quota.Options{Limits: quota.Limits{MaxSessions: 3}})
	defer l.Close()
	var mu sync.Mutex
	stored := 1
	count := func(context.Context) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return stored, nil
	}
	var wg sync.WaitGroup
	var admitted, refused atomic.Int32
	for range 20 {
		wg.Go(func() {
			done, err := l.AdmitSession(t.Context(), "acme", count)
			if err != nil {
				if errdefs.CodeOf(err) != errdefs.CodeQuotaExceeded {
					t.Errorf("err = %v, want %s", err, errdefs.CodeQuotaExceeded)
				}
				refused.Add(1)
				return
			}
			mu.Lock()
			stored++ // the session is stored before done
			mu.Unlock()
			admitted.Add(1)
			done()
		})
	}
	wg.Wait()
	if admitted.Load() != 2 || refused.Load() != 18 {
		t.Errorf("admitted %d, refused %d; want 2 and 18", admitted.Load(), refused.Load())
	}
	done, err := l.AdmitSession(t.Context(), "other", func(context.Context) (int, error) { return 2, nil })
	if err != nil {
		t.Fatalf("another tenant below the limit: %v", err)
	}
	done()
}

// TestLimiter_Nil: a nil limiter limits nothing.
func TestLimiter_Nil(t *testing.T) {
	var l *quota.Limiter
	ctx := context.Background()
	if _, ok, err := l.AllowRequest(ctx, "acme"); ok || err != nil {
		t.Errorf("AllowRequest = %v, %v", ok, err)
	}
	done, err := l.AdmitRun(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	done(true)
	start, err := l.AdmitStart(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	start(true)
	unlock, err := l.AdmitSession(ctx, "acme", func(context.Context) (int, error) { return 1e9, nil })
	if err != nil {
		t.Fatal(err)
	}
	unlock()
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
