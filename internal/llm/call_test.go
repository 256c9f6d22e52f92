package llm_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kerneld/kerneld/internal/llm"
)

// fastPolicy retries quickly, so tests about what is retried run fast.
func fastPolicy(retries int) llm.CallPolicy {
	p := llm.DefaultCallPolicy()
	p.MaxRetries, p.BaseDelay, p.MaxDelay = retries, time.Millisecond, 4*time.Millisecond
	return p
}

func apiErr(status int) error {
	return &llm.APIError{Provider: "test", StatusCode: status, Message: "boom"}
}

func connErr() error {
	return &llm.ConnectionError{Provider: "test", Err: errors.New("connection failed: reset")}
}

// script is an attempt func that fails with errs[i] on attempt i (nil:
// succeed) and counts its attempts; emitFirst makes each attempt emit a
// text chunk before failing.
type script struct {
	errs      []error
	emitFirst bool
	attempts  int
}

func (s *script) attempt(_ context.Context, emit func(llm.Chunk) error) error {
	i := s.attempts
	s.attempts++
	if s.emitFirst {
		if err := emit(llm.Chunk{Text: "partial"}); err != nil {
			return err
		}
	}
	if i < len(s.errs) {
		return s.errs[i]
	}
	return nil
}

func TestCallPolicy_Do(t *testing.T) {
	emitFail := errors.New("client gone")
	tests := []struct {
		name         string
		errs         []error
		emitFirst    bool
		emitErr      error
		retries      int
		wantAttempts int
		wantErr      error // nil: success
	}{
		{"429 then success", []error{apiErr(429)}, false, nil, 3, 2, nil},
		{"500, 503 then success", []error{apiErr(500), apiErr(503)}, false, nil, 3, 3, nil},
		{"529 overloaded then success", []error{apiErr(529)}, false, nil, 3, 2, nil},
		{"connection error then success", []error{connErr()}, false, nil, 3, 2, nil},
		{"gives up after max_retries", []error{apiErr(500), apiErr(500), apiErr(500), apiErr(500)}, false, nil, 2, 3, apiErr(500)},
		{"max_retries 0 never retries", []error{apiErr(429)}, false, nil, 0, 1, apiErr(429)},
		{"400 is not retried", []error{apiErr(400)}, false, nil, 3, 1, apiErr(400)},
		{"401 is not retried", []error{apiErr(401)}, false, nil, 3, 1, apiErr(401)},
		{"403 is not retried", []error{apiErr(403)}, false, nil, 3, 1, apiErr(403)},
		{"404 is not retried", []error{apiErr(404)}, false, nil, 3, 1, apiErr(404)},
		{"plain errors are not retried", []error{errors.New("malformed")}, false, nil, 3, 1, errors.New("malformed")},
		{"no retry once output started", []error{connErr()}, true, nil, 3, 1, connErr()},
		{"emit error ends the call unchanged", nil, true, emitFail, 3, 1, emitFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{errs: tt.errs, emitFirst: tt.emitFirst}
			emitted := 0
			err := fastPolicy(tt.retries).Do(t.Context(), "test", func(llm.Chunk) error {
				emitted++
				return tt.emitErr
			}, s.attempt)
			assert.Equal(t, tt.wantAttempts, s.attempts, "attempts")
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr.Error())
			if tt.emitErr != nil {
				assert.Same(t, tt.emitErr, err, "emit's error must come back unchanged")
			}
			if tt.emitFirst {
				assert.Equal(t, 1, emitted, "the partial output is emitted once, never repeated")
			}
		})
	}
}

// TestCallPolicy_Do_Delays proves, on synctest's fake clock, that a
// Retry-After is waited exactly, that backoff doubles with jitter within
// its bounds, and that a Retry-After beyond MaxRetryAfter is not waited.
func TestCallPolicy_Do_Delays(t *testing.T) {
	t.Run("Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			limited := &llm.APIError{Provider: "test", StatusCode: 429, RetryAfter: 3 * time.Second}
			gaps := timedAttempts(t, llm.DefaultCallPolicy(), []error{limited, limited})
			assert.Equal(t, []time.Duration{3 * time.Second, 3 * time.Second}, gaps)
		})
	})
	t.Run("exponential backoff with jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := llm.DefaultCallPolicy()
			p.MaxRetries = 5
			gaps := timedAttempts(t, p, []error{apiErr(500), apiErr(500), apiErr(500), apiErr(500), apiErr(500)})
			require.Len(t, gaps, 5)
			for i, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
				assert.GreaterOrEqual(t, gaps[i], want/2, "retry %d", i+1)
				assert.LessOrEqual(t, gaps[i], want, "retry %d", i+1)
			}
		})
	})
	t.Run("Retry-After too long fails at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tooLong := &llm.APIError{Provider: "test", StatusCode: 429, RetryAfter: time.Hour}
			gaps := timedAttempts(t, llm.DefaultCallPolicy(), []error{tooLong})
			assert.Empty(t, gaps)
		})
	})
}

// timedAttempts runs Do with attempts failing with errs and returns the
// time between consecutive attempts.
func timedAttempts(t *testing.T, p llm.CallPolicy, errs []error) []time.Duration {
	t.Helper()
	var at []time.Time
	s := &script{errs: errs}
	_ = p.Do(t.Context(), "test", func(llm.Chunk) error { return nil }, func(ctx context.Context, emit func(llm.Chunk) error) error {
		at = append(at, time.Now())
		return s.attempt(ctx, emit)
	})
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	return gaps
}

func TestCallPolicy_Do_Timeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := llm.DefaultCallPolicy()
		p.Timeout, p.MaxRetries = 2*time.Second, 1
		attempts := 0
		start := time.Now()
		err := p.Do(t.Context(), "test", func(llm.Chunk) error { return nil }, func(ctx context.Context, _ func(llm.Chunk) error) error {
			attempts++
			<-ctx.Done() // a server that never answers
			return ctx.Err()
		})
		assert.EqualError(t, err, "test: no complete response within 2s")
		assert.True(t, llm.Retryable(err))
		assert.Equal(t, 2, attempts, "a timed-out attempt is retried")
		assert.Less(t, time.Since(start), 6*time.Second)
	})
}

func TestCallPolicy_Do_Cancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		limited := &llm.APIError{Provider: "test", StatusCode: 429, RetryAfter: 30 * time.Second}
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		err := llm.DefaultCallPolicy().Do(ctx, "test", func(llm.Chunk) error { return nil }, (&script{errs: []error{limited}}).attempt)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, time.Second, time.Since(start), "cancel ends the wait for Retry-After at once")
	})
}
