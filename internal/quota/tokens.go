package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// tokenDayTTL keeps a day's token counter a day past its end, so a
// backend's clock a little off the limiter's still finds it.
const tokenDayTTL = 48 * time.Hour

// TokensSpent returns the model tokens tenant has spent today (UTC).
func (l *Limiter) TokensSpent(ctx context.Context, tenant string) (int64, error) {
	if l == nil {
		return 0, nil
	}
	n, err := l.backend.Add(ctx, tokensKey(tenant, l.now().UTC()), 0, tokenDayTTL)
	if err != nil {
		return 0, fmt.Errorf("read tokens spent: %w", err)
	}
	return n, nil
}

// checkTokens refuses a run when tenant's token budget for the day is
// spent: whatever it would cost, it would pass the budget.
func (l *Limiter) checkTokens(ctx context.Context, tenant string) error {
	if l.limits.TokensPerDay <= 0 {
		return nil
	}
	spent, err := l.TokensSpent(ctx, tenant)
	if err != nil {
		return err
	}
	return l.tokensLeft(spent)
}

// tokensLeft returns the refusal of a budget with spent tokens used, or
// nil while some are left.
func (l *Limiter) tokensLeft(spent int64) error {
	if l.limits.TokensPerDay <= 0 || spent < l.limits.TokensPerDay {
		return nil
	}
	retry := untilTomorrow(l.now())
	return exceeded(errdefs.CodeQuotaExceeded, LimitTokensPerDay, retry,
		"this tenant spent %d of its %d model tokens for today (UTC); the budget renews in %s",
		spent, l.limits.TokensPerDay, retry.Round(time.Second))
}

// ChargeTokens adds n model tokens to what tenant spent today and returns
// the refusal of its budget once it is spent (nil while tokens are left):
// the kernel stops the run that spent them.
func (l *Limiter) ChargeTokens(ctx context.Context, tenant string, n int64) error {
	if l == nil || l.limits.TokensPerDay <= 0 {
		return nil
	}
	spent, err := l.backend.Add(ctx, tokensKey(tenant, l.now().UTC()), n, tokenDayTTL)
	if err != nil {
		return fmt.Errorf("count tokens spent: %w", err)
	}
	return l.tokensLeft(spent)
}
