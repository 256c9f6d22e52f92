package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kerneld/kerneld/internal/images"
	"github.com/kerneld/kerneld/internal/kernel"
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// ImagesConfig bounds the images users' messages carry.
type ImagesConfig struct {
	MaxBytes       int64 `yaml:"max_bytes"`        // one image
	MaxPerMessage  int   `yaml:"max_per_message"`  // images in one message
	MaxTenantBytes int64 `yaml:"max_tenant_bytes"` // every image a tenant keeps, each counted once
	// MaxRequestBytes bounds the body of a request that may carry images
	// (the run routes), in place of http.max_body_bytes when larger.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
}

func defaultImagesConfig() ImagesConfig {
	l := images.DefaultLimits()
	return ImagesConfig{MaxBytes: l.MaxBytes, MaxPerMessage: l.MaxPerMessage, MaxTenantBytes: l.MaxTenantBytes,
		MaxRequestBytes: 24 << 20}
}

func (c ImagesConfig) check() error {
	if c.MaxBytes <= 0 || c.MaxPerMessage <= 0 || c.MaxTenantBytes <= 0 || c.MaxRequestBytes <= 0 {
		return errors.New("images: max_bytes, max_per_message, max_tenant_bytes and max_request_bytes must be positive")
	}
	return nil
}

func (c ImagesConfig) limits() images.Limits {
	return images.Limits{MaxBytes: c.MaxBytes, MaxPerMessage: c.MaxPerMessage, MaxTenantBytes: c.MaxTenantBytes}
}

// SchedulesConfig bounds the sessions' scheduled prompts and says how
// they are fired.
type SchedulesConfig struct {
	MaxPerSession int           `yaml:"max_per_session"`
	MaxPerTenant  int           `yaml:"max_per_tenant"`
	MinInterval   time.Duration `yaml:"min_interval"` // the shortest every
	MaxAhead      time.Duration `yaml:"max_ahead"`    // how far ahead at may be; the longest every
	Poll          time.Duration `yaml:"poll"`         // how often due schedules are looked for
	ClaimTTL      time.Duration `yaml:"claim_ttl"`    // how long a dead replica's firings wait for another
}

func defaultSchedulesConfig() SchedulesConfig {
	l := schedule.DefaultLimits()
	return SchedulesConfig{MaxPerSession: l.PerSession, MaxPerTenant: l.PerTenant, MinInterval: l.MinEvery,
		MaxAhead: l.MaxAhead, Poll: time.Second, ClaimTTL: 30 * time.Second}
}

func (c SchedulesConfig) check() error {
	if c.MaxPerSession <= 0 || c.MaxPerTenant <= 0 || c.MinInterval <= 0 || c.MaxAhead <= 0 || c.Poll <= 0 || c.ClaimTTL <= 0 {
		return errors.New("schedules: max_per_session, max_per_tenant, min_interval, max_ahead, poll and claim_ttl must be positive")
	}
	if c.ClaimTTL < 2*c.Poll {
		return errors.New("schedules: claim_ttl must be at least twice poll")
	}
	return nil
}

// newImages returns the image library over db, or one that keeps no
// images when db cannot keep them.
func newImages(cfg Config, db store) *images.Library {
	st, _ := db.(images.Store) // nil: images are checked, none kept
	return images.New(st, cfg.Images.limits(), nil)
}

// newSchedules returns the schedule service over db, firing through
// runner, or nil when db cannot keep schedules. It is started once the
// kernel runs (startSchedules).
func newSchedules(cfg Config, db store, runner *kernelRunner, log *slog.Logger) (*schedule.Service, error) {
	st, ok := db.(schedule.Store)
	if !ok {
		log.Warn("the store keeps no schedules: their routes answer 503", "store", cfg.Store.Kind)
		return nil, nil
	}
	c := cfg.Schedules
	return schedule.New(schedule.Options{
		Store: st, Runner: runner, Holder: cfg.Store.Redis.Replica, Poll: c.Poll, ClaimTTL: c.ClaimTTL, Logger: log,
		Limits: schedule.Limits{Bounds: schedule.Bounds{PerSession: c.MaxPerSession, PerTenant: c.MaxPerTenant},
			MinEvery: c.MinInterval, MaxAhead: c.MaxAhead, MaxInputBytes: cfg.Sessions.MaxInputBytes},
	})
}

// kernelRunner posts a schedule's firing to the kernel as the tenant's
// run, which the kernel admits under the tenant's quotas as it admits a
// client's.
type kernelRunner struct {
	kernel *kernel.Kernel // set once the kernel is built, before the schedules start
}

// Run implements schedule.Runner.
func (r *kernelRunner) Run(ctx context.Context, req schedule.RunRequest) (schedule.RunResult, error) {
	ctx = kernel.WithTenant(ctx, req.Tenant)
	run, _, err := r.kernel.Run(ctx, req.SessionID, kernel.RunRequest{
		Input: req.Input, IfBusy: kernel.BusyPolicy(req.IfBusy), IdempotencyKey: req.IdempotencyKey, Source: req.Source,
	})
	if err != nil {
		return schedule.RunResult{}, err
	}
	return schedule.RunResult{RunID: run.ID, Queued: run.State == session.RunQueued}, nil
}
