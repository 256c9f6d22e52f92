package transfer

import (
	"context"
	"time"

	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// Source is what Export reads: a subset of kernel.Store, which every
// backend implements.
type Source interface {
	GetSession(ctx context.Context, id string) (session.Session, error)
	ListSessions(ctx context.Context, q session.Query) ([]session.Session, error)
	GetRun(ctx context.Context, sessionID, runID string) (session.Run, error)
	ListRuns(ctx context.Context, sessionID string, q session.RunQuery) ([]session.Run, error)
	ListMessages(ctx context.Context, sessionID string, after int64, limit int) ([]session.Message, error)
	ListMemory(ctx context.Context, sessionID string) ([]session.MemoryEntry, error)
	ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]session.Event, error)
}

// Target is what Import writes, and Verify reads back.
type Target interface {
	Source
	CreateSession(ctx context.Context, s session.Session) error
	UpdateSession(ctx context.Context, s session.Session) error
	DeleteSession(ctx context.Context, id string) error
	CreateRun(ctx context.Context, r session.Run, c session.RunConstraints) error
	RecentMessages(ctx context.Context, sessionID string, n int) ([]session.Message, error)
	AppendMessages(ctx context.Context, token int64, msgs ...session.Message) error
	PutMemory(ctx context.Context, e session.MemoryEntry, maxEntries int) error
	AppendEvents(ctx context.Context, token int64, evs []session.Event) error
	AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (int64, error)
	RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) error
	ReleaseLease(ctx context.Context, sessionID string, token int64) error
}

// imageSource is a Source that keeps images (images.Store).
type imageSource interface {
	ListImages(ctx context.Context, sessionID string) ([]session.Image, error)
	GetImage(ctx context.Context, sessionID, hash string) (session.Image, error)
}

// imageTarget is a Target that keeps images (images.Store).
type imageTarget interface {
	PutImage(ctx context.Context, sessionID string, img session.Image, maxTenantBytes int64) error
	ReleaseImages(ctx context.Context, sessionID string) error
}

// scheduleSource is a Source that keeps schedules (schedule.Store).
type scheduleSource interface {
	ListSchedules(ctx context.Context, sessionID string) ([]schedule.Schedule, error)
}

// scheduleTarget is a Target that keeps schedules (schedule.Store).
type scheduleTarget interface {
	CreateSchedule(ctx context.Context, s schedule.Schedule, b schedule.Bounds) error
	DeleteSessionSchedules(ctx context.Context, sessionID string) error
}

// Page sizes: how many records of a kind are read, or written, at once.
// They bound the memory a transfer holds. Tests lower them.
var (
	sessionPage = 100
	runPage     = 200
	messagePage = 500
	eventPage   = 1000
)
