package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/kerneld/kerneld/internal/errdefs"
	"github.com/kerneld/kerneld/internal/session"
)

// Quotas is what the kernel asks and tells the tenants' quotas
// (internal/quota decides them): whether a session or a run may be
// created (see admit.go), which runs execute on this replica, and the
// model tokens they spend.
type Quotas interface {
	// AdmitSession admits a session of tenant, which stores stored(ctx)
	// sessions, or refuses it with an error of kind errdefs.ErrExhausted.
	// Until done is called, once the session is stored or failed to be,
	// no other session of tenant is admitted, on any replica.
	AdmitSession(ctx context.Context, tenant string, stored func(context.Context) (int, error)) (done func(), err error)
	// AdmitRun admits a run of tenant about to be posted; done says
	// whether it was created after all.
	AdmitRun(ctx context.Context, tenant string) (done func(created bool), err error)
	// AdmitStart admits a run of tenant about to start executing here: a
	// concurrent run's place, the run's once done(true) (RunEnded frees
	// it), given back by done(false).
	AdmitStart(ctx context.Context, tenant string) (done func(executing bool), err error)
	// RunStarted and RunEnded bracket a run of tenant executing on this
	// replica (RunStarted only for a run not admitted by AdmitRun or
	// AdmitStart, which count it already). They must not block.
	RunStarted(tenant string)
	RunEnded(tenant string)
	// ChargeTokens adds n model tokens to what tenant spent today (n may
	// be 0, to look). Once the tenant's budget is spent it returns an
	// error of kind errdefs.ErrExhausted saying so, and the run stops.
	ChargeTokens(ctx context.Context, tenant string, n int64) error
}

// noQuotas is the Quotas of a kernel configured without any.
type noQuotas struct{}

func (noQuotas) AdmitSession(context.Context, string, func(context.Context) (int, error)) (func(), error) {
	return func() {}, nil
}

func (noQuotas) AdmitRun(context.Context, string) (func(bool), error) { return func(bool) {}, nil }

func (noQuotas) AdmitStart(context.Context, string) (func(bool), error) { return func(bool) {}, nil }

func (noQuotas) RunStarted(string)                                 {}
func (noQuotas) RunEnded(string)                                   {}
func (noQuotas) ChargeTokens(context.Context, string, int64) error { return nil }

// quotaError stops a run whose tenant's token budget is spent; the run
// ends with RUN_ERROR code quota_exceeded and the quota's message.
type quotaError struct{ err error }

func (e *quotaError) Error() string { return e.err.Error() }
func (e *quotaError) Unwrap() error { return e.err }

// chargeTokens counts what the run's model calls spent since the last
// charge (n tokens) against its tenant's budget. A budget found spent
// stops the run; a quota store that fails does not: the tokens are
// counted on the next charge's success or not at all, which errs on the
// side of the run.
func (r *runner) chargeTokens(ctx context.Context, n int64) error {
	err := r.k.quotas.ChargeTokens(context.WithoutCancel(ctx), r.ar.tenant, n)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errdefs.ErrExhausted):
		return &quotaError{err: err}
	}
	r.log.Warn("count model tokens", "tokens", n, "err", err)
	return nil
}

// quotaEnding is how a run stopped by its tenant's quota ends.
func quotaEnding(err error) (code, message string, ok bool) {
	qe, ok := errors.AsType[*quotaError](err)
	if !ok {
		return "", "", false
	}
	return session.ErrorCodeQuotaExceeded, qe.Error(), true
}

// CountSessions returns how many sessions the caller's tenant stores, for
// its quota.
func (k *Kernel) CountSessions(ctx context.Context) (int, error) {
	n, err := k.store.CountSessions(ctx, TenantFrom(ctx))
	if err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}
