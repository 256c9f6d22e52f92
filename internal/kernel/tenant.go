package kernel

import "context"

type tenantKey struct{}

// WithTenant returns ctx carrying the tenant of the caller, as established
// by authentication. Sessions of other tenants are invisible to it.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFrom returns the tenant carried by ctx, or "" when none is.
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}
